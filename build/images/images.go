// Package images builds Kiln's container images without a Docker engine or a registry:
// go-containerregistry assembles them from files (a minimal base: users, CA certificates,
// /tmp; then a static binary) into multi-platform OCI indexes, written as OCI archives that
// containerd imports (`ctr images import`) and that `crane push` or go-containerregistry's
// remote package push. Every byte is a function of the inputs: sorted tar entries, fixed
// modes and owners, a fixed timestamp (the commit's), so two builds give the same digest.
package images

import (
	"archive/tar"
	"bytes"
	"fmt"
	"io"
	"os"
	"path"
	"sort"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// NonRoot is the user and group every Kiln image runs as (distroless's "nonroot").
const NonRoot = 65532

// KilnImage is one of Kiln's own images (make images, a release): its name and the static
// binary it runs, built for each platform; base runs none.
type KilnImage struct{ Name, Binary string }

// Kiln are Kiln's own images, in the order they are built and pushed.
var Kiln = []KilnImage{
	{"base", ""}, {"pause", "kiln-pause"}, {"kiln-operator", "kiln-operator"}, {"kiln-apiserver", "kiln-apiserver"}, {"kiln", "kiln"},
}

// File is one entry of a layer. A path ending in "/" is a directory.
type File struct {
	Path string
	Mode int64
	Data []byte
	// Source, when set, is a file whose content is streamed in place of Data.
	Source string
}

// Image is what one image is made of, for one platform.
type Image struct {
	// Layers, bottom first; the base layer is shared by every image that starts with it.
	Layers [][]File
	// Entrypoint and Cmd of the image config.
	Entrypoint, Cmd []string
	// User is "UID:GID".
	User string
	Env  []string
	// Labels, e.g. the OCI annotations org.opencontainers.image.{source,revision,version}.
	Labels map[string]string
	// Created is the image's timestamp, and every file's.
	Created time.Time
}

// Build assembles img for platform.
func Build(img Image, platform v1.Platform) (v1.Image, error) {
	out := mutate.MediaType(empty.Image, types.OCIManifestSchema1)
	out = mutate.ConfigMediaType(out, types.OCIConfigJSON)
	for i, files := range img.Layers {
		data, err := layerTar(files, img.Created)
		if err != nil {
			return nil, fmt.Errorf("layer %d: %w", i, err)
		}
		layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) {
			return io.NopCloser(bytes.NewReader(data)), nil
		}, tarball.WithMediaType(types.OCILayer))
		if err != nil {
			return nil, fmt.Errorf("layer %d: %w", i, err)
		}
		if out, err = mutate.Append(out, mutate.Addendum{Layer: layer, History: v1.History{
			Created: v1.Time{Time: img.Created}, CreatedBy: "kiln-images",
		}}); err != nil {
			return nil, fmt.Errorf("layer %d: %w", i, err)
		}
	}
	return withConfig(out, img, platform)
}

// withConfig sets out's config from img (entrypoint, command, user, environment, labels,
// timestamp) for platform.
func withConfig(out v1.Image, img Image, platform v1.Platform) (v1.Image, error) {
	cf, err := out.ConfigFile()
	if err != nil {
		return nil, err
	}
	cf = cf.DeepCopy()
	cf.Architecture, cf.OS, cf.Variant = platform.Architecture, platform.OS, platform.Variant
	cf.Created = v1.Time{Time: img.Created}
	cf.Config.Entrypoint, cf.Config.Cmd = img.Entrypoint, img.Cmd
	cf.Config.User, cf.Config.Env, cf.Config.Labels = img.User, img.Env, img.Labels
	cf.Config.WorkingDir = "/"
	return mutate.ConfigFile(out, cf)
}

// Index is a multi-platform image: one Build per platform, with the labels as annotations.
func Index(build func(v1.Platform) (Image, error), platforms []v1.Platform) (v1.ImageIndex, error) {
	idx := mutate.IndexMediaType(empty.Index, types.OCIImageIndex)
	var adds []mutate.IndexAddendum
	var labels map[string]string
	for _, p := range platforms {
		spec, err := build(p)
		if err != nil {
			return nil, err
		}
		img, err := Build(spec, p)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", p, err)
		}
		labels = spec.Labels
		adds = append(adds, mutate.IndexAddendum{Add: img, Descriptor: v1.Descriptor{Platform: &p}})
	}
	idx = mutate.AppendManifests(idx, adds...)
	if len(labels) > 0 {
		idx = mutate.Annotations(idx, labels).(v1.ImageIndex)
	}
	return idx, nil
}

// ParsePlatforms reads "linux/amd64,linux/arm64".
func ParsePlatforms(s string) ([]v1.Platform, error) {
	var out []v1.Platform
	for _, p := range strings.Split(s, ",") {
		parsed, err := v1.ParsePlatform(strings.TrimSpace(p))
		if err != nil {
			return nil, fmt.Errorf("platform %q: %w", p, err)
		}
		if parsed.OS != "linux" {
			return nil, fmt.Errorf("platform %q: only linux images are built", p)
		}
		out = append(out, *parsed)
	}
	return out, nil
}

// layerTar writes files as a tar with sorted entries, each parent directory first, owned
// by root, stamped with at: the same files give the same bytes.
func layerTar(files []File, at time.Time) ([]byte, error) {
	var buf bytes.Buffer
	if err := writeLayerTar(&buf, files, at); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// writeLayerTar is layerTar writing to w, reading each Source as it goes.
func writeLayerTar(w io.Writer, files []File, at time.Time) error {
	entries := map[string]File{}
	for _, f := range files {
		p := strings.TrimPrefix(path.Clean("/"+f.Path), "/")
		if p == "" || p == "." {
			return fmt.Errorf("file %q: no name", f.Path)
		}
		if strings.HasSuffix(f.Path, "/") {
			p += "/"
		}
		f.Path = p
		entries[p] = f
		for dir := path.Dir(strings.TrimSuffix(p, "/")); dir != "."; dir = path.Dir(dir) {
			if _, ok := entries[dir+"/"]; !ok {
				entries[dir+"/"] = File{Path: dir + "/", Mode: 0o755}
			}
		}
	}
	names := make([]string, 0, len(entries))
	for n := range entries {
		names = append(names, n)
	}
	sort.Strings(names)
	tw := tar.NewWriter(w)
	for _, n := range names {
		f := entries[n]
		hdr := &tar.Header{Name: f.Path, Mode: f.Mode, ModTime: at, Format: tar.FormatPAX}
		var src io.Reader = bytes.NewReader(f.Data)
		switch {
		case strings.HasSuffix(n, "/"):
			hdr.Typeflag = tar.TypeDir
		case f.Source != "":
			file, err := os.Open(f.Source)
			if err != nil {
				return err
			}
			defer file.Close()
			info, err := file.Stat()
			if err != nil {
				return err
			}
			hdr.Typeflag, hdr.Size, src = tar.TypeReg, info.Size(), file
		default:
			hdr.Typeflag, hdr.Size = tar.TypeReg, int64(len(f.Data))
		}
		if err := tw.WriteHeader(hdr); err != nil {
			return err
		}
		if _, err := io.Copy(tw, src); err != nil {
			return err
		}
	}
	return tw.Close()
}
