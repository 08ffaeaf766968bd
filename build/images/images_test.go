package images

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
)

var at = time.Date(2026, 11, 23, 0, 0, 0, 0, time.UTC)

func testImage(binary []byte) func(v1.Platform) (Image, error) {
	return func(p v1.Platform) (Image, error) {
		return Image{
			Layers: [][]File{
				{{Path: "etc/passwd", Mode: 0o644, Data: []byte("root:x:0:0::/root:/sbin/nologin\n")}, {Path: "tmp/", Mode: 0o1777}},
				{{Path: "usr/local/bin/tool", Mode: 0o755, Data: append([]byte(p.Architecture+"\n"), binary...)}},
			},
			Entrypoint: []string{"/usr/local/bin/tool"},
			User:       "65532:65532",
			Labels:     map[string]string{"org.opencontainers.image.revision": "abc123"},
			Created:    at,
		}, nil
	}
}

func TestBuildsAreReproducible(t *testing.T) {
	platforms, err := ParsePlatforms("linux/amd64,linux/arm64")
	if err != nil {
		t.Fatal(err)
	}
	digest := func(binary string) v1.Hash {
		idx, err := Index(testImage([]byte(binary)), platforms)
		if err != nil {
			t.Fatal(err)
		}
		d, err := idx.Digest()
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	if a, b := digest("v1"), digest("v1"); a != b {
		t.Errorf("two builds of the same inputs: %s and %s", a, b)
	}
	if a, b := digest("v1"), digest("v2"); a == b {
		t.Errorf("different binaries gave the same digest %s", a)
	}

	dir := t.TempDir()
	archive := func(name string) []byte {
		idx, err := Index(testImage([]byte("v1")), platforms)
		if err != nil {
			t.Fatal(err)
		}
		file := filepath.Join(dir, name)
		if err := WriteArchive(file, "kiln.local/tool:v1", idx, at); err != nil {
			t.Fatal(err)
		}
		data, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		return data
	}
	if a, b := archive("a.tar"), archive("b.tar"); !bytes.Equal(a, b) {
		t.Error("two OCI archives of the same index differ")
	}
}

func TestImageConfig(t *testing.T) {
	platforms, err := ParsePlatforms("linux/amd64,linux/arm64")
	if err != nil {
		t.Fatal(err)
	}
	idx, err := Index(testImage([]byte("bin")), platforms)
	if err != nil {
		t.Fatal(err)
	}
	m, err := idx.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, d := range m.Manifests {
		img, err := idx.Image(d.Digest)
		if err != nil {
			t.Fatal(err)
		}
		cf, err := img.ConfigFile()
		if err != nil {
			t.Fatal(err)
		}
		layers, err := img.Layers()
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, d.Platform.String()+" "+cf.Architecture+" "+cf.Config.User+" "+cf.Config.Labels["org.opencontainers.image.revision"]+" "+cf.Created.UTC().Format(time.RFC3339)+" "+string(rune('0'+len(layers))))
	}
	want := []string{"linux/amd64 amd64 65532:65532 abc123 2026-11-23T00:00:00Z 2", "linux/arm64 arm64 65532:65532 abc123 2026-11-23T00:00:00Z 2"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("images (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(map[string]string{"org.opencontainers.image.revision": "abc123"}, m.Annotations); diff != "" {
		t.Errorf("index annotations (-want +got):\n%s", diff)
	}
}

func TestArchiveIsAnOCILayout(t *testing.T) {
	platforms, _ := ParsePlatforms("linux/amd64")
	idx, err := Index(testImage([]byte("bin")), platforms)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	file := filepath.Join(dir, "tool.tar")
	if err := WriteArchive(file, "kiln.local/tool:v1", idx, at); err != nil {
		t.Fatal(err)
	}
	// Unpack it and read it back as a layout: what skopeo and containerd do.
	unpacked := filepath.Join(dir, "unpacked")
	if err := untarLayout(file, unpacked); err != nil {
		t.Fatal(err)
	}
	p, err := layout.FromPath(unpacked)
	if err != nil {
		t.Fatal(err)
	}
	outer, err := p.ImageIndex()
	if err != nil {
		t.Fatal(err)
	}
	m, err := outer.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	if len(m.Manifests) != 1 || m.Manifests[0].Annotations["io.containerd.image.name"] != "kiln.local/tool:v1" {
		t.Fatalf("index.json %+v, want one entry named kiln.local/tool:v1", m.Manifests)
	}
	want, _ := idx.Digest()
	if m.Manifests[0].Digest != want {
		t.Errorf("index.json names %s, want the built index %s", m.Manifests[0].Digest, want)
	}
}
