package images

import (
	"archive/tar"
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
)

// WriteArchive writes idx as an OCI archive (an OCI image layout in a tar) whose index names
// it ref, the way `ctr images import` and skopeo's oci-archive read it. Entries are sorted
// and stamped with at, so the archive's bytes depend on the images only.
func WriteArchive(file, ref string, idx v1.ImageIndex, at time.Time) error {
	dir, err := os.MkdirTemp(filepath.Dir(file), ".layout-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	p, err := layout.Write(dir, empty.Index)
	if err != nil {
		return fmt.Errorf("writing OCI layout: %w", err)
	}
	if err := p.AppendIndex(idx, layout.WithAnnotations(map[string]string{
		// containerd takes the image's name from the first, OCI tools from the second.
		"io.containerd.image.name":          ref,
		"org.opencontainers.image.ref.name": ref,
	})); err != nil {
		return fmt.Errorf("writing OCI layout: %w", err)
	}
	// The layout's files go into the archive the way layer files go into a layer: sorted,
	// owned by root, stamped with at; streamed, as a layer may be gigabytes.
	var files []File
	if err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(dir, path)
		files = append(files, File{Path: filepath.ToSlash(rel), Mode: 0o644, Source: path})
		return nil
	}); err != nil {
		return err
	}
	tmp := file + ".tmp"
	defer os.Remove(tmp)
	out, err := os.Create(tmp)
	if err != nil {
		return err
	}
	defer out.Close()
	if err := writeLayerTar(out, files, at); err != nil {
		return err
	}
	if err := out.Close(); err != nil {
		return err
	}
	return os.Rename(tmp, file)
}

// ArchiveRef is the image name an OCI archive of WriteArchive carries, read from its
// index.json without reading its blobs.
func ArchiveRef(file string) (string, error) {
	f, err := os.Open(file)
	if err != nil {
		return "", err
	}
	defer f.Close()
	tr := tar.NewReader(f)
	for {
		hdr, err := tr.Next()
		if err != nil {
			return "", fmt.Errorf("%s: no index.json: %w", file, err)
		}
		if hdr.Name != "index.json" {
			continue
		}
		var idx v1.IndexManifest
		if err := json.NewDecoder(tr).Decode(&idx); err != nil {
			return "", fmt.Errorf("%s: index.json: %w", file, err)
		}
		for _, m := range idx.Manifests {
			if ref := m.Annotations["io.containerd.image.name"]; ref != "" {
				return ref, nil
			}
		}
		return "", fmt.Errorf("%s: index.json names no image", file)
	}
}
