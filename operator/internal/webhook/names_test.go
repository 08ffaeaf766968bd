package webhook

import (
	"path/filepath"
	"testing"

	kilntesting "github.com/kiln-ml/kiln/api/testing"
)

// The operator injects its CA into the webhook configurations by name: the names it uses
// must be those generated into config/webhook, which the chart and the local platform install.
func TestConfigurationNamesMatchTheGeneratedManifests(t *testing.T) {
	objs, err := kilntesting.ReadManifests(filepath.Join("..", "..", "config", "webhook", "manifests.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"MutatingWebhookConfiguration": MutatingConfigurationName, "ValidatingWebhookConfiguration": ValidatingConfigurationName}
	for _, o := range objs {
		if name, ok := want[o.GetKind()]; !ok || o.GetName() != name {
			t.Errorf("%s %s: the operator injects its CA into %q", o.GetKind(), o.GetName(), name)
		}
		delete(want, o.GetKind())
	}
	if len(want) > 0 {
		t.Errorf("not generated: %v", want)
	}
}

// The apiserver calls mutating webhooks in the order of their configurations' names. Kueue's
// webhook appends a runtime patch to every TrainJob; the defaulter must come after it to stamp
// that patch in its one call (before it, Kueue's change would make the apiserver call it again).
func TestTheDefaulterComesAfterKueuesWebhook(t *testing.T) {
	const kueue = "kueue-mutating-webhook-configuration" // Kueue's config/components/webhook, as its chart names it
	if MutatingConfigurationName <= kueue {
		t.Errorf("the defaulter's configuration %q sorts before Kueue's %q: the apiserver would call it twice per TrainJob write", MutatingConfigurationName, kueue)
	}
}
