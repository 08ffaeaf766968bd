package integration

import (
	"context"
	"crypto/x509"
	"encoding/pem"
	"os"
	"path/filepath"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	kilnwebhook "github.com/kiln-ml/kiln/operator/internal/webhook"
)

var _ = Describe("Webhook certificate management in a cluster", func() {
	It("issues a certificate for the webhook Service, writes it for the server and injects the CA", func(ctx context.Context) {
		ns := newNamespace(ctx)
		path := "/unused"
		svc := &admissionregistrationv1.ServiceReference{Name: "kiln-webhook", Namespace: ns, Path: &path}
		none := admissionregistrationv1.SideEffectClassNone
		ignore := admissionregistrationv1.Ignore
		rules := []admissionregistrationv1.RuleWithOperations{{
			Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create},
			Rule:       admissionregistrationv1.Rule{APIGroups: []string{"example.com"}, APIVersions: []string{"v1"}, Resources: []string{"nothings"}},
		}}
		validating := &admissionregistrationv1.ValidatingWebhookConfiguration{
			ObjectMeta: metav1.ObjectMeta{Name: ns + "-validator"},
			Webhooks: []admissionregistrationv1.ValidatingWebhook{{Name: "v.kiln.dev", ClientConfig: admissionregistrationv1.WebhookClientConfig{Service: svc},
				Rules: rules, SideEffects: &none, FailurePolicy: &ignore, AdmissionReviewVersions: []string{"v1"}}},
		}
		mutating := &admissionregistrationv1.MutatingWebhookConfiguration{
			ObjectMeta: metav1.ObjectMeta{Name: ns + "-defaulter"},
			Webhooks: []admissionregistrationv1.MutatingWebhook{{Name: "m.kiln.dev", ClientConfig: admissionregistrationv1.WebhookClientConfig{Service: svc},
				Rules: rules, SideEffects: &none, FailurePolicy: &ignore, AdmissionReviewVersions: []string{"v1"}}},
		}
		Expect(k8s.Create(ctx, validating)).To(Succeed())
		Expect(k8s.Create(ctx, mutating)).To(Succeed())

		certDir := GinkgoT().TempDir()
		mgr, err := ctrl.NewManager(cfg, ctrl.Options{Scheme: k8s.Scheme(), Metrics: metricsserver.Options{BindAddress: "0"}})
		Expect(err).NotTo(HaveOccurred())
		ready := make(chan struct{})
		Expect(kilnwebhook.ManageCerts(ctx, mgr, kilnwebhook.CertConfig{
			Namespace: ns, ServiceName: "kiln-webhook", SecretName: "kiln-webhook-certs", CertDir: certDir,
			ValidatingConfiguration: validating.Name, MutatingConfiguration: mutating.Name,
		}, ready)).To(Succeed())
		mgrCtx, stop := context.WithCancel(context.Background())
		DeferCleanup(stop)
		go func() {
			defer GinkgoRecover()
			Expect(mgr.Start(mgrCtx)).To(Succeed())
		}()
		By("mounting the Secret into the cert directory, as the kubelet does")
		Eventually(ctx, func(g Gomega) {
			secret := &corev1.Secret{}
			g.Expect(k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: "kiln-webhook-certs"}, secret)).To(Succeed())
			g.Expect(secret.Data).To(HaveKey("tls.crt"))
			for name, data := range secret.Data {
				g.Expect(os.WriteFile(filepath.Join(certDir, name), data, 0o600)).To(Succeed())
			}
		}).Should(Succeed())
		Eventually(ctx, ready).Should(BeClosed())

		secret := &corev1.Secret{}
		Expect(k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: "kiln-webhook-certs"}, secret)).To(Succeed())
		Expect(secret.Data).To(HaveKey("ca.crt"))
		crt, err := os.ReadFile(filepath.Join(certDir, "tls.crt"))
		Expect(err).NotTo(HaveOccurred())
		Expect(filepath.Join(certDir, "tls.key")).To(BeAnExistingFile())
		block, _ := pem.Decode(crt)
		Expect(block).NotTo(BeNil())
		leaf, err := x509.ParseCertificate(block.Bytes)
		Expect(err).NotTo(HaveOccurred())
		Expect(leaf.DNSNames).To(ContainElement("kiln-webhook." + ns + ".svc"))
		pool := x509.NewCertPool()
		Expect(pool.AppendCertsFromPEM(secret.Data["ca.crt"])).To(BeTrue())
		_, err = leaf.Verify(x509.VerifyOptions{Roots: pool, DNSName: "kiln-webhook." + ns + ".svc"})
		Expect(err).NotTo(HaveOccurred(), "the serving certificate is signed by the injected CA")

		Eventually(ctx, func(g Gomega) {
			g.Expect(k8s.Get(ctx, client.ObjectKeyFromObject(validating), validating)).To(Succeed())
			g.Expect(k8s.Get(ctx, client.ObjectKeyFromObject(mutating), mutating)).To(Succeed())
			g.Expect(validating.Webhooks[0].ClientConfig.CABundle).To(Equal(secret.Data["ca.crt"]))
			g.Expect(mutating.Webhooks[0].ClientConfig.CABundle).To(Equal(secret.Data["ca.crt"]))
		}).Should(Succeed())
	})
})
