package images

import (
	"archive/tar"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/remote"
)

// OpenArchive returns the image index an OCI archive of WriteArchive holds, read lazily from
// a temporary directory, and a function that removes that directory once the
// index is no longer read.
func OpenArchive(file string) (v1.ImageIndex, func(), error) {
	dir, err := os.MkdirTemp("", "kiln-image-")
	if err != nil {
		return nil, nil, err
	}
	done := func() { _ = os.RemoveAll(dir) }
	idx, err := readLayout(file, dir)
	if err != nil {
		done()
		return nil, nil, err
	}
	return idx, done, nil
}

func readLayout(file, dir string) (v1.ImageIndex, error) {
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
// config (docker login) when the registry asks for them, and the options given (a
// transport trusting the registry's CA, say).
func Push(idx v1.ImageIndex, ref string, nameOpts []name.Option, opts ...remote.Option) error {
	r, err := name.ParseReference(ref, nameOpts...)
	if err != nil {
		return fmt.Errorf("image reference %q: %w", ref, err)
	}
	opts = append([]remote.Option{remote.WithAuthFromKeychain(authn.DefaultKeychain)}, opts...)
	if err := remote.WriteIndex(r, idx, opts...); err != nil {
		return fmt.Errorf("pushing %s: %w", ref, err)
	}
	return nil
}

// TrustingTransport is an HTTP transport that trusts the system's CAs and those in the PEM
// file caFile: for a registry whose certificate a private CA signed.
func TrustingTransport(caFile string) (http.RoundTripper, error) {
	pem, err := os.ReadFile(caFile)
	if err != nil {
		return nil, err
	}
	pool, err := x509.SystemCertPool()
	if err != nil || pool == nil {
		pool = x509.NewCertPool()
	}
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("%s holds no PEM certificate", caFile)
	}
	t := remote.DefaultTransport.(*http.Transport).Clone()
	t.TLSClientConfig = &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	return t, nil
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
