package e2e

import (
	"os"

	. "github.com/onsi/ginkgo/v2"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	"github.com/kiln-ml/kiln/e2e/internal/platform"
)

func mustQuantity(s string) resource.Quantity { return resource.MustParse(s) }

func yamlInto(doc string, u *unstructured.Unstructured) error {
	return yaml.Unmarshal([]byte(doc), &u.Object)
}

// nonLoopbackListeners lists sockets of local platform processes that listen beyond
// 127.0.0.1. It needs KILN_ROOT (the repository), so it only runs on the local platform.
func nonLoopbackListeners() ([]string, error) {
	root := os.Getenv("KILN_ROOT")
	if root == "" {
		Skip("KILN_ROOT is not set: not running on the local platform")
	}
	pids := platform.DefaultConfig(root).PIDs()
	if len(pids) == 0 {
		Skip("no local platform processes found under " + root)
	}
	ls, err := platform.Listeners(pids)
	if err != nil {
		return nil, err
	}
	var bad []string
	for _, l := range ls {
		if !l.Addr.IsLoopback() {
			bad = append(bad, l.String())
		}
	}
	return bad, nil
}
