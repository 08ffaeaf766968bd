package release

import (
	"encoding/json"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// TestSBOM reads the build information of a binary built here (kiln-release, which links
// cyclonedx-go), as make release reads each image's binary. (A test binary records no modules.)
func TestSBOM(t *testing.T) {
	self := filepath.Join(t.TempDir(), "kiln-release")
	if out, err := exec.Command("go", "build", "-o", self, "github.com/kiln-ml/kiln/build/cmd/kiln-release").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	base := []Package{{Name: "ca-certificates", Version: "20230311", PURL: "pkg:deb/debian/ca-certificates@20230311"}}
	data, err := SBOM("kiln-operator", "v0.2.0", "sha256:abc", self, base)
	if err != nil {
		t.Fatal(err)
	}
	var bom struct {
		BOMFormat   string
		SpecVersion string
		Metadata    struct {
			Component struct{ Type, Name, Version, Purl string }
		}
		Components []struct{ Type, Name, Version, Purl string }
	}
	if err := json.Unmarshal(data, &bom); err != nil {
		t.Fatal(err)
	}
	if bom.BOMFormat != "CycloneDX" || bom.SpecVersion != "1.6" {
		t.Errorf("format %q %q", bom.BOMFormat, bom.SpecVersion)
	}
	if c := bom.Metadata.Component; c.Type != "container" || c.Purl != "pkg:oci/kiln-operator@sha256%3Aabc?tag=v0.2.0" {
		t.Errorf("the image: %+v", c)
	}
	purls := map[string]bool{}
	for _, c := range bom.Components {
		purls[c.Purl] = true
	}
	for _, want := range []string{
		"pkg:golang/github.com/CycloneDX/cyclonedx-go@v0.12.0",
		"pkg:golang/stdlib@" + strings.TrimPrefix(runtime.Version(), "go"),
		"pkg:deb/debian/ca-certificates@20230311",
	} {
		if !purls[want] {
			t.Errorf("the SBOM lacks %s", want)
		}
	}
	if _, err := SBOM("x", "v0.2.0", "sha256:abc", "/nonexistent", nil); err == nil {
		t.Error("a missing binary was taken")
	}
}
