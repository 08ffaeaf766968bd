package trainjob

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"sync"

	"golang.org/x/sync/singleflight"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	kiln "github.com/kiln-ml/kiln/api/kiln/v1alpha1"
	trainer "github.com/kiln-ml/kiln/api/trainer/v1alpha1"
	"github.com/kiln-ml/kiln/operator/internal/render"
)

// StatusServer says where the trainers of the JobSets this controller creates report their
// progress, and where the CA certificate they trust is: CAFile, read when a namespace first
// needs it and whenever it changes, is copied into each namespace's
// kiln.StatusServerCAConfigMap. Zero: no status server, nothing injected.
type StatusServer struct {
	render.StatusServer
	CAFile string
}

// WithStatusServer makes the JobSets this reconciler creates report to s.
func (r *Reconciler) WithStatusServer(s StatusServer) *Reconciler {
	r.statusServer = s
	return r
}

// statusCAs remembers which namespaces hold the current CA certificate, so that each gets
// one write per operator process (and one more when the certificate changes), not one per job:
// the first jobs of a namespace, reconciled at once, share the one write in flight.
type statusCAs struct {
	mu     sync.Mutex
	done   map[string][32]byte
	flight singleflight.Group
}

// ensureStatusServerCA writes the status server's CA certificate into the TrainJob's
// namespace, unless this process already did. Trainer pods mount it (optionally: a pod
// whose namespace lacks it starts all the same, and its reports fail TLS until it exists).
func (r *Reconciler) ensureStatusServerCA(ctx context.Context, namespace string) error {
	if r.statusServer.BaseURL == "" || r.statusServer.CAFile == "" {
		return nil
	}
	ca, err := os.ReadFile(r.statusServer.CAFile)
	if err != nil {
		return fmt.Errorf("reading the status server's CA certificate: %w", err)
	}
	sum := sha256.Sum256(ca)
	r.cas.mu.Lock()
	have, ok := r.cas.done[namespace]
	r.cas.mu.Unlock()
	if ok && have == sum {
		return nil
	}
	_, err, _ = r.cas.flight.Do(namespace+"/"+hex.EncodeToString(sum[:]), func() (any, error) {
		return nil, r.writeStatusServerCA(ctx, namespace, ca, sum)
	})
	return err
}

// writeStatusServerCA writes the CA certificate ca (sum is its hash) into namespace.
func (r *Reconciler) writeStatusServerCA(ctx context.Context, namespace string, ca []byte, sum [32]byte) error {
	cm := &corev1.ConfigMap{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: kiln.StatusServerCAConfigMap, Labels: map[string]string{
			"app.kubernetes.io/managed-by": "kiln-operator",
		}, Annotations: map[string]string{
			"kiln.dev/description": "The CA certificate of Kiln's status server, which TrainJobs' trainers report their progress to (" + trainer.EnvStatusServerCACert + ").",
		}},
		Data: map[string]string{trainer.StatusServerCAFile: string(ca)},
	}
	if _, err := r.apply(ctx, cm); err != nil {
		return fmt.Errorf("writing ConfigMap %s/%s: %w", namespace, kiln.StatusServerCAConfigMap, err)
	}
	r.cas.mu.Lock()
	if r.cas.done == nil {
		r.cas.done = map[string][32]byte{}
	}
	r.cas.done[namespace] = sum
	r.cas.mu.Unlock()
	return nil
}
