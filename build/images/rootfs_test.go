package images

import (
	"archive/tar"
	"bytes"
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// A root filesystem's layer keeps links, hard links and special modes, and is the same
// bytes each time.
func TestRootfsTar(t *testing.T) {
	root := t.TempDir()
	for path, data := range map[string]string{"usr/bin/python3": "elf", "etc/os-release": "bookworm"} {
		if err := os.MkdirAll(filepath.Join(root, filepath.Dir(path)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(root, path), []byte(data), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink("python3", filepath.Join(root, "usr/bin/python")); err != nil {
		t.Fatal(err)
	}
	if err := os.Link(filepath.Join(root, "usr/bin/python3"), filepath.Join(root, "usr/bin/python3.11")); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(filepath.Join(root, "etc/os-release"), 0o755|os.ModeSetuid); err != nil {
		t.Fatal(err)
	}
	at := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	var layers [][]byte
	for range 2 {
		file := filepath.Join(t.TempDir(), "layer.tar")
		if err := writeRootfsTar(root, file, at); err != nil {
			t.Fatal(err)
		}
		data, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		layers = append(layers, data)
	}
	if !bytes.Equal(layers[0], layers[1]) {
		t.Error("two layers of the same tree differ")
	}
	got := map[string]*tar.Header{}
	tr := tar.NewReader(bytes.NewReader(layers[0]))
	for {
		hdr, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		got[hdr.Name] = hdr
		if !hdr.ModTime.Equal(at) {
			t.Errorf("%s stamped %s", hdr.Name, hdr.ModTime)
		}
	}
	if h := got["usr/bin/python"]; h == nil || h.Typeflag != tar.TypeSymlink || h.Linkname != "python3" {
		t.Errorf("symlink: %+v", h)
	}
	if h := got["usr/bin/python3.11"]; h == nil || h.Typeflag != tar.TypeLink || h.Linkname != "usr/bin/python3" {
		t.Errorf("hard link: %+v", h)
	}
	if h := got["etc/os-release"]; h == nil || h.Mode&0o4000 == 0 {
		t.Errorf("setuid lost: %+v", h)
	}
	if h := got["usr/"]; h == nil || h.Typeflag != tar.TypeDir {
		t.Errorf("directory: %+v", h)
	}
}
