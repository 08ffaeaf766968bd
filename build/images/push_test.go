package images

import (
	"encoding/pem"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	"github.com/google/go-containerregistry/pkg/v1/remote"
)

// TestPushToARegistry pushes an archive's index to go-containerregistry's own registry
// served on 127.0.0.1, and reads it back by tag: the same digest, every platform.
func TestPushToARegistry(t *testing.T) {
	srv := httptest.NewServer(registry.New())
	defer srv.Close()
	platforms, _ := ParsePlatforms("linux/amd64,linux/arm64")
	idx, err := Index(testImage([]byte("bin")), platforms)
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "tool.tar")
	if err := WriteArchive(file, "kiln.local/tool:v1", idx, at); err != nil {
		t.Fatal(err)
	}
	read, done, err := OpenArchive(file)
	if err != nil {
		t.Fatal(err)
	}
	defer done()
	ref := strings.TrimPrefix(srv.URL, "http://") + "/kiln/tool:v1"
	if err := Push(read, ref, []name.Option{name.Insecure}); err != nil {
		t.Fatal(err)
	}
	r, err := name.ParseReference(ref, name.Insecure)
	if err != nil {
		t.Fatal(err)
	}
	got, err := remote.Index(r)
	if err != nil {
		t.Fatal(err)
	}
	want, _ := idx.Digest()
	if d, _ := got.Digest(); d != want {
		t.Errorf("pulled %s, want the built %s", d, want)
	}
	m, err := got.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	if len(m.Manifests) != 2 {
		t.Errorf("pulled index has %d platforms, want 2", len(m.Manifests))
	}
}

// TestPushTrustingAPrivateCA pushes over HTTPS to a registry whose certificate the system does
// not trust: refused, then accepted with its CA in the file TrustingTransport reads.
func TestPushTrustingAPrivateCA(t *testing.T) {
	srv := httptest.NewTLSServer(registry.New())
	defer srv.Close()
	platforms, _ := ParsePlatforms("linux/amd64")
	idx, err := Index(testImage([]byte("bin")), platforms)
	if err != nil {
		t.Fatal(err)
	}
	ref := strings.TrimPrefix(srv.URL, "https://") + "/kiln/tool:v1"
	if err := Push(idx, ref, nil); err == nil || !strings.Contains(err.Error(), "certificate") {
		t.Fatalf("pushed to a registry of an unknown CA: %v", err)
	}
	caFile := filepath.Join(t.TempDir(), "ca.crt")
	if err := os.WriteFile(caFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw}), 0o600); err != nil {
		t.Fatal(err)
	}
	tr, err := TrustingTransport(caFile)
	if err != nil {
		t.Fatal(err)
	}
	if err := Push(idx, ref, nil, remote.WithTransport(tr)); err != nil {
		t.Fatal(err)
	}
	if _, err := TrustingTransport(filepath.Join(t.TempDir(), "none")); err == nil {
		t.Error("a missing CA file was taken")
	}
}
