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
