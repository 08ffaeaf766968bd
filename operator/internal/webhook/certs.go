package webhook

import (
	"context"
	"fmt"

	"github.com/open-policy-agent/cert-controller/pkg/rotator"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// CertConfig says where the operator keeps its webhook serving certificate in a cluster.
type CertConfig struct {
	// Namespace and ServiceName make the certificate's DNS name <service>.<namespace>.svc.
	Namespace   string
	ServiceName string
	// SecretName is the Secret holding the CA and the serving certificate.
	SecretName string
	// CertDir is where the pod mounts the Secret and the webhook server reads tls.crt and tls.key.
	CertDir string
	// The webhook configurations whose caBundle the operator keeps current.
	ValidatingConfiguration string
	MutatingConfiguration   string
}

// Names of Kiln's webhook configurations (as the Helm chart and the local platform create them).
// The mutating one's name sorts after Kueue's (see the markers in trainjob_webhook.go).
const (
	ValidatingConfigurationName = "kiln-trainjob-validator"
	MutatingConfigurationName   = "trainjob-defaulter.kiln.dev"
)

// The permissions of certificate management: its Secret, and the CA bundle of the webhook
// configurations. The validator reads runtimes (the controller's permissions cover them).
// +kubebuilder:rbac:groups="",namespace=kiln-system,resources=secrets,verbs=get;list;watch;create;update;patch
// +kubebuilder:rbac:groups=admissionregistration.k8s.io,resources=mutatingwebhookconfigurations;validatingwebhookconfigurations,verbs=get;list;watch;update;patch

// ManageCerts makes the operator issue and rotate its own webhook certificate: a CA and a
// serving certificate in a Secret, with the CA injected into the webhook configurations.
// The pod mounts that Secret at CertDir; ready is closed once the mounted files match it.
func ManageCerts(ctx context.Context, mgr ctrl.Manager, cfg CertConfig, ready chan struct{}) error {
	if cfg.Namespace == "" || cfg.ServiceName == "" || cfg.SecretName == "" || cfg.CertDir == "" {
		return fmt.Errorf("managing webhook certificates needs a namespace, service, secret and cert directory (got %+v)", cfg)
	}
	// The rotator only updates the Secret; create it when the installation did not.
	c, err := client.New(mgr.GetConfig(), client.Options{Scheme: mgr.GetScheme()})
	if err != nil {
		return err
	}
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: cfg.Namespace, Name: cfg.SecretName}}
	if err := c.Create(ctx, secret); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("creating webhook certificate Secret %s/%s: %w", cfg.Namespace, cfg.SecretName, err)
	}
	return rotator.AddRotator(mgr, &rotator.CertRotator{
		SecretKey:      types.NamespacedName{Namespace: cfg.Namespace, Name: cfg.SecretName},
		CertDir:        cfg.CertDir,
		CAName:         "kiln-webhook-ca",
		CAOrganization: "kiln",
		DNSName:        fmt.Sprintf("%s.%s.svc", cfg.ServiceName, cfg.Namespace),
		ExtraDNSNames:  []string{cfg.ServiceName, fmt.Sprintf("%s.%s", cfg.ServiceName, cfg.Namespace), fmt.Sprintf("%s.%s.svc.cluster.local", cfg.ServiceName, cfg.Namespace)},
		IsReady:        ready,
		Webhooks: []rotator.WebhookInfo{
			{Type: rotator.Validating, Name: cfg.ValidatingConfiguration},
			{Type: rotator.Mutating, Name: cfg.MutatingConfiguration},
		},
		// Every replica serves webhooks, not only the leader.
		RequireLeaderElection: false,
	})
}
