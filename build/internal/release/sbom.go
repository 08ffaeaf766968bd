package release

import (
	"bytes"
	"debug/buildinfo"
	"fmt"
	"strings"

	cdx "github.com/CycloneDX/cyclonedx-go"
)

// Package is a component of an image that no Go binary records: what its base layer holds.
type Package struct{ Name, Version, PURL string }

// SBOM is the CycloneDX bill of materials (JSON, spec 1.6) of one of Kiln's images, of
// version and digest: the image; the Go modules its binary (a file; none for the base image)
// was built from, as the binary's own build information records them, with the Go standard
// library and toolchain; and the packages of its base layer.
func SBOM(image, version, digest, binary string, base []Package) ([]byte, error) {
	var components []cdx.Component
	if binary != "" {
		bi, err := buildinfo.ReadFile(binary)
		if err != nil {
			return nil, fmt.Errorf("the build information of %s: %w", binary, err)
		}
		goVersion := strings.TrimPrefix(bi.GoVersion, "go")
		components = append(components,
			cdx.Component{
				BOMRef: "pkg:golang/" + bi.Main.Path + "@" + version, Type: cdx.ComponentTypeApplication,
				Name: bi.Main.Path, Version: version, PackageURL: "pkg:golang/" + bi.Main.Path + "@" + version,
			},
			cdx.Component{
				BOMRef: "pkg:golang/stdlib@" + goVersion, Type: cdx.ComponentTypeLibrary,
				Name: "stdlib", Version: goVersion, PackageURL: "pkg:golang/stdlib@" + goVersion,
			})
		for _, dep := range bi.Deps {
			if dep.Replace != nil {
				dep = dep.Replace
			}
			if dep.Version == "" || dep.Version == "(devel)" {
				continue // a module of this repository, built from its tree: the main component's
			}
			purl := "pkg:golang/" + dep.Path + "@" + dep.Version
			c := cdx.Component{BOMRef: purl, Type: cdx.ComponentTypeLibrary, Name: dep.Path, Version: dep.Version, PackageURL: purl}
			if dep.Sum != "" {
				c.Properties = &[]cdx.Property{{Name: "go:module:sum", Value: dep.Sum}}
			}
			components = append(components, c)
		}
	}
	for _, p := range base {
		components = append(components, cdx.Component{BOMRef: p.PURL, Type: cdx.ComponentTypeLibrary, Name: p.Name, Version: p.Version, PackageURL: p.PURL})
	}
	bom := cdx.NewBOM()
	purl := fmt.Sprintf("pkg:oci/%s@%s?tag=%s", image, strings.ReplaceAll(digest, ":", "%3A"), version)
	bom.Metadata = &cdx.Metadata{
		Component: &cdx.Component{BOMRef: purl, Type: cdx.ComponentTypeContainer, Name: image, Version: version, PackageURL: purl},
		Tools: &cdx.ToolsChoice{Components: &[]cdx.Component{{
			Type: cdx.ComponentTypeApplication, Name: "kiln-release", Version: version,
		}}},
	}
	bom.Components = &components
	var b bytes.Buffer
	enc := cdx.NewBOMEncoder(&b, cdx.BOMFileFormatJSON)
	enc.SetPretty(true)
	if err := enc.EncodeVersion(bom, cdx.SpecVersion1_6); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}
