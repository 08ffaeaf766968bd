package manifests

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	kilntesting "github.com/kiln-ml/kiln/api/testing"
)

const release = `
apiVersion: v1
kind: Namespace
metadata: {name: kueue-system}
---
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: workloads.kueue.x-k8s.io}
spec:
  conversion:
    strategy: Webhook
    webhook:
      clientConfig:
        service: {name: kueue-webhook-service, namespace: kueue-system, path: /convert}
      conversionReviewVersions: [v1]
---
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: jobsets.jobset.x-k8s.io}
spec:
  conversion:
    strategy: Webhook
    webhook:
      clientConfig:
        service: {name: jobset-webhook-service, namespace: jobset-system, path: /convert}
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingWebhookConfiguration
metadata: {name: kueue-validating-webhook-configuration}
webhooks:
- name: vjob.kb.io
  clientConfig:
    service: {name: kueue-webhook-service, namespace: kueue-system, path: /validate-batch-v1-job}
  rules: [{apiGroups: [batch], apiVersions: [v1], operations: [CREATE, UPDATE], resources: [jobs]}]
- name: vpod.kb.io
  clientConfig:
    service: {name: kueue-webhook-service, namespace: kueue-system, path: /validate--v1-pod}
  rules: [{apiGroups: [""], apiVersions: [v1], operations: [CREATE, UPDATE], resources: [pods]}]
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: kueue-controller-manager, namespace: kueue-system}
`

func TestLocalize(t *testing.T) {
	objs, err := kilntesting.DecodeManifests([]byte(release))
	if err != nil {
		t.Fatal(err)
	}
	ca := []byte("CA")
	caB64 := encodeBase64(ca)
	cases := map[string]struct {
		addon Addon
		want  map[string]map[string]any // kind/name -> the part that changes
	}{
		"keeps Kueue's conversion, drops hooks of disabled integrations": {
			addon: Addon{WebhookPort: 9444, KeepConversion: []string{"workloads.kueue.x-k8s.io"}, WebhookGroups: []string{"batch"}},
			want: map[string]map[string]any{
				"CustomResourceDefinition/workloads.kueue.x-k8s.io": {"conversion": map[string]any{
					"strategy": "Webhook",
					"webhook": map[string]any{
						"clientConfig":             map[string]any{"url": "https://127.0.0.1:9444/convert", "caBundle": caB64},
						"conversionReviewVersions": []any{"v1"},
					},
				}},
				"CustomResourceDefinition/jobsets.jobset.x-k8s.io": {"conversion": map[string]any{"strategy": "None"}},
				"ValidatingWebhookConfiguration/kueue-validating-webhook-configuration": {"webhooks": []any{map[string]any{
					"name":         "vjob.kb.io",
					"clientConfig": map[string]any{"url": "https://127.0.0.1:9444/validate-batch-v1-job", "caBundle": caB64},
					"rules":        []any{map[string]any{"apiGroups": []any{"batch"}, "apiVersions": []any{"v1"}, "operations": []any{"CREATE", "UPDATE"}, "resources": []any{"jobs"}}},
				}}},
			},
		},
		"keeps every webhook without a group filter": {
			addon: Addon{WebhookPort: 9443},
			want: map[string]map[string]any{
				"CustomResourceDefinition/workloads.kueue.x-k8s.io": {"conversion": map[string]any{"strategy": "None"}},
				"CustomResourceDefinition/jobsets.jobset.x-k8s.io":  {"conversion": map[string]any{"strategy": "None"}},
				"ValidatingWebhookConfiguration/kueue-validating-webhook-configuration": {"webhooks": []any{
					map[string]any{
						"name":         "vjob.kb.io",
						"clientConfig": map[string]any{"url": "https://127.0.0.1:9443/validate-batch-v1-job", "caBundle": caB64},
						"rules":        []any{map[string]any{"apiGroups": []any{"batch"}, "apiVersions": []any{"v1"}, "operations": []any{"CREATE", "UPDATE"}, "resources": []any{"jobs"}}},
					},
					map[string]any{
						"name":         "vpod.kb.io",
						"clientConfig": map[string]any{"url": "https://127.0.0.1:9443/validate--v1-pod", "caBundle": caB64},
						"rules":        []any{map[string]any{"apiGroups": []any{""}, "apiVersions": []any{"v1"}, "operations": []any{"CREATE", "UPDATE"}, "resources": []any{"pods"}}},
					},
				}},
			},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, err := tc.addon.Localize(objs, ca)
			if err != nil {
				t.Fatal(err)
			}
			gotParts := map[string]map[string]any{}
			for _, o := range got {
				key := o.GetKind() + "/" + o.GetName()
				switch o.GetKind() {
				case "CustomResourceDefinition":
					conv, _, _ := unstructured.NestedMap(o.Object, "spec")
					gotParts[key] = conv
				default:
					hooks, _, _ := unstructured.NestedSlice(o.Object, "webhooks")
					gotParts[key] = map[string]any{"webhooks": hooks}
				}
			}
			if diff := cmp.Diff(tc.want, gotParts); diff != "" {
				t.Errorf("Localize() mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestLocalizeRejectsWebhookWithoutPath(t *testing.T) {
	objs, err := kilntesting.DecodeManifests([]byte(`
apiVersion: admissionregistration.k8s.io/v1
kind: MutatingWebhookConfiguration
metadata: {name: broken}
webhooks:
- name: m.kb.io
  clientConfig: {service: {name: s, namespace: n}}
`))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := (Addon{WebhookPort: 1}).Localize(objs, nil); err == nil {
		t.Fatal("want an error for a webhook without a service path")
	}
}
