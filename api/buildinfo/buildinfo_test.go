package buildinfo

import (
	"runtime"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
)

func TestCollector(t *testing.T) {
	want := `# HELP kiln_build_info Always 1: the component (operator, apiserver), its version and the Go version it was built with.
# TYPE kiln_build_info gauge
kiln_build_info{component="operator",goversion="` + runtime.Version() + `",version="dev"} 1
`
	if err := testutil.CollectAndCompare(Collector("operator"), strings.NewReader(want)); err != nil {
		t.Fatal(err)
	}
}
