package images

import (
	"archive/tar"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/remote"
)

// ReadArchive returns the image index an OCI archive of WriteArchive holds.
func ReadArchive(file string) (v1.ImageIndex, error) {
	dir, err := os.MkdirTemp("", "kiln-image-")
	if err != nil {
		return nil, err
	}
	// The layout reads its blobs lazily: the directory lives as long as the process.
	if err := untarLayout(file, dir); err != nil {
		return nil, fmt.Errorf("reading %s: %w", file, err)
	}
	p, err := layout.FromPath(dir)
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", file, err)
	}
	outer, err := p.ImageIndex()
	if err != nil {
		return nil, err
	}
	m, err := outer.IndexManifest()
	if err != nil {
		return nil, err
	}
	if len(m.Manifests) != 1 {
		return nil, fmt.Errorf("%s holds %d images, want 1", file, len(m.Manifests))
	}
	return outer.ImageIndex(m.Manifests[0].Digest)
}

// Push pushes idx to ref (registry/repository:tag), with the credentials of the Docker
// config (docker login) when the registry asks for them.
func Push(idx v1.ImageIndex, ref string, opts ...name.Option) error {
	r, err := name.ParseReference(ref, opts...)
	if err != nil {
		return fmt.Errorf("image reference %q: %w", ref, err)
	}
	if err := remote.WriteIndex(r, idx, remote.WithAuthFromKeychain(authn.DefaultKeychain)); err != nil {
		return fmt.Errorf("pushing %s: %w", ref, err)
	}
	return nil
}

func untarLayout(file, dir string) error {
	f, err := os.Open(file)
	if err != nil {
		return err
	}
	defer f.Close()
	tr := tar.NewReader(f)
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		rel := filepath.FromSlash(hdr.Name)
		if filepath.IsAbs(rel) || rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
			return fmt.Errorf("entry %q leaves the archive", hdr.Name)
		}
		path := filepath.Join(dir, rel)
		if hdr.Typeflag == tar.TypeDir {
			if err := os.MkdirAll(path, 0o755); err != nil {
				return err
			}
			continue
		}
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			return err
		}
		out, err := os.Create(path)
		if err != nil {
			return err
		}
		if _, err := io.Copy(out, tr); err != nil {
			out.Close()
			return err
		}
		if err := out.Close(); err != nil {
			return err
		}
	}
}
