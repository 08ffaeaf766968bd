package trainjob

import (
	"context"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/kiln-ml/kiln/operator/internal/render"
)

// The first jobs of a namespace, reconciled at once, write its CA ConfigMap once between
// them (the bench's 64 queued jobs made 17 writes before), and once more when the
// certificate changes.
func TestStatusServerCAWrittenOncePerNamespace(t *testing.T) {
	// Each write is held until the test lets it go, so that the other jobs ask while it is
	// in flight; applied says a write began.
	var applies atomic.Int32
	applied := make(chan struct{}, 100)
	var release chan struct{}
	c := stopperClient(t, interceptor.Funcs{Apply: func(ctx context.Context, c client.WithWatch, obj runtime.ApplyConfiguration, opts ...client.ApplyOption) error {
		applies.Add(1)
		applied <- struct{}{}
		<-release
		return nil
	}})
	caFile := filepath.Join(t.TempDir(), "ca.crt")
	if err := os.WriteFile(caFile, []byte("first"), 0o600); err != nil {
		t.Fatal(err)
	}
	r := NewReconciler(c, c, nil, nil).WithStatusServer(StatusServer{StatusServer: render.StatusServer{BaseURL: "https://status:8443"}, CAFile: caFile})
	ensure := func(n int, ns string) {
		release = make(chan struct{})
		var wg sync.WaitGroup
		for range n {
			wg.Go(func() {
				if err := r.ensureStatusServerCA(context.Background(), ns); err != nil {
					t.Error(err)
				}
			})
		}
		<-applied
		// A second write would begin at once (the others are already asking); give it the
		// chance before the first one ends. A passing run waits the whole while; in a
		// failing one the second write ends the wait.
		select {
		case <-applied:
		case <-time.After(200 * time.Millisecond):
		}
		close(release)
		wg.Wait()
		for len(applied) > 0 {
			<-applied
		}
	}
	ensure(32, "team-a")
	if got := applies.Load(); got != 1 {
		t.Fatalf("%d writes for 32 jobs of one namespace, want 1", got)
	}
	ensure(32, "team-b")
	if got := applies.Load(); got != 2 {
		t.Fatalf("%d writes after a second namespace, want 2", got)
	}
	if err := os.WriteFile(caFile, []byte("rotated"), 0o600); err != nil {
		t.Fatal(err)
	}
	ensure(8, "team-a")
	if got := applies.Load(); got != 3 {
		t.Fatalf("%d writes after the certificate changed, want 3", got)
	}
}
