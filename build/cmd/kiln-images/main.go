// Command kiln-images writes Kiln's container images as OCI archives (see package images):
// kiln.local/base, kiln.local/pause, and an image per binary (kiln-operator, kiln-apiserver,
// kiln), each for every platform asked, from static binaries built per platform into
// <binaries>/<os>_<arch>/. With --push REGISTRY it pushes the archives written before to
// REGISTRY/<image>:<version> instead. With --rootfs DIR it writes one image of that root
// filesystem (kiln.local/torch-cpu, a Debian system made by debootstrap) for this machine's
// platform.
package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/types"

	"github.com/kiln-ml/kiln/build/images"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "kiln-images:", err)
		os.Exit(1)
	}
}

func run() error {
	out := flag.String("out", "bin/images", "directory the OCI archives are written to")
	binaries := flag.String("binaries", "bin/images/build", "directory of the static binaries, one <os>_<arch> directory per platform")
	platformList := flag.String("platforms", "linux/amd64,linux/arm64", "platforms of every image")
	registry := flag.String("registry", "kiln.local", "registry part of the images' names")
	version := flag.String("version", "dev", "image tag and org.opencontainers.image.version")
	revision := flag.String("revision", "", "org.opencontainers.image.revision (the commit)")
	source := flag.String("source", "https://github.com/kiln-ml/kiln", "org.opencontainers.image.source")
	created := flag.String("created", "1970-01-01T00:00:00Z", "the images' timestamp, RFC 3339 (the commit's, for reproducible builds)")
	caFile := flag.String("ca-certificates", "/etc/ssl/certs/ca-certificates.crt", "CA bundle of the base image (Debian's ca-certificates)")
	push := flag.String("push", "", "push the archives in --out to this registry (host[:port][/path]) instead of building")
	insecure := flag.Bool("insecure", false, "with --push: plain HTTP (127.0.0.1 and localhost registries use it anyway)")
	pushCA := flag.String("push-ca-file", "", "with --push: trust the CA certificates in this PEM file too (a registry with a private CA)")
	rootfs := flag.String("rootfs", "", "build one image, named by the single argument, of this root filesystem (tagged --version)")
	cmd := flag.String("cmd", "", "with --rootfs: the image's command, space separated")
	flag.Parse()
	names := flag.Args()
	if *rootfs != "" {
		if len(names) != 1 {
			return fmt.Errorf("--rootfs builds one image: name it")
		}
		at, err := time.Parse(time.RFC3339, *created)
		if err != nil {
			return fmt.Errorf("--created: %w", err)
		}
		return rootfsImage(*rootfs, *out, *registry, names[0], *version, strings.Fields(*cmd), at.UTC())
	}
	if len(names) == 0 {
		for _, img := range images.Kiln {
			names = append(names, img.Name)
		}
	}
	if *push != "" {
		var opts []name.Option
		if *insecure {
			opts = append(opts, name.Insecure)
		}
		var remoteOpts []remote.Option
		if *pushCA != "" {
			t, err := images.TrustingTransport(*pushCA)
			if err != nil {
				return fmt.Errorf("--push-ca-file: %w", err)
			}
			remoteOpts = append(remoteOpts, remote.WithTransport(t))
		}
		for _, n := range names {
			idx, done, err := images.OpenArchive(filepath.Join(*out, n+".tar"))
			if err != nil {
				return fmt.Errorf("%w (make images writes it)", err)
			}
			ref := fmt.Sprintf("%s/%s:%s", *push, n, *version)
			err = images.Push(idx, ref, opts, remoteOpts...)
			digest, _ := idx.Digest()
			done()
			if err != nil {
				return err
			}
			fmt.Printf("pushed %s@%s\n", ref, digest)
		}
		return nil
	}

	at, err := time.Parse(time.RFC3339, *created)
	if err != nil {
		return fmt.Errorf("--created: %w", err)
	}
	at = at.UTC()
	platforms, err := images.ParsePlatforms(*platformList)
	if err != nil {
		return err
	}
	base, err := images.BaseLayer(*caFile)
	if err != nil {
		return err
	}
	labels := map[string]string{
		"org.opencontainers.image.source":   *source,
		"org.opencontainers.image.revision": *revision,
		"org.opencontainers.image.version":  *version,
	}
	user := fmt.Sprintf("%d:%d", images.NonRoot, images.NonRoot)
	// binaryImage is the base plus one static binary at path (no leading slash), its entrypoint.
	binaryImage := func(binary, path string) func(v1.Platform) (images.Image, error) {
		return func(p v1.Platform) (images.Image, error) {
			data, err := os.ReadFile(filepath.Join(*binaries, p.OS+"_"+p.Architecture, binary))
			if err != nil {
				return images.Image{}, fmt.Errorf("%s for %s: %w (make images or make addon-images builds it)", binary, p, err)
			}
			return images.Image{
				Layers:     [][]images.File{base, {{Path: path, Mode: 0o755, Data: data}}},
				Entrypoint: []string{"/" + path},
				User:       user, Env: images.BaseEnv, Labels: labels, Created: at,
			}, nil
		}
	}
	kilnImage := func(binary string) func(v1.Platform) (images.Image, error) {
		return binaryImage(binary, "usr/local/bin/"+binary)
	}
	build := map[string]func(v1.Platform) (images.Image, error){
		// JobSet's and Kueue's controllers, where upstream's images hold them: /manager.
		"jobset": binaryImage("jobset", "manager"),
		"kueue":  binaryImage("kueue", "manager"),
	}
	for _, img := range images.Kiln {
		if img.Binary == "" {
			build[img.Name] = func(v1.Platform) (images.Image, error) {
				return images.Image{Layers: [][]images.File{base}, User: user, Env: images.BaseEnv, Labels: labels, Created: at}, nil
			}
			continue
		}
		build[img.Name] = kilnImage(img.Binary)
	}
	if err := os.MkdirAll(*out, 0o755); err != nil {
		return err
	}
	for _, name := range names {
		b, ok := build[name]
		if !ok {
			return fmt.Errorf("no image %q: choose from base, pause, kiln-operator, kiln-apiserver, kiln, jobset, kueue", name)
		}
		idx, err := images.Index(b, platforms)
		if err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		if err := writeArchive(*out, *registry, name, *version, idx, at); err != nil {
			return err
		}
	}
	return nil
}

// writeArchive writes idx as <out>/<name>.tar, named <registry>/<name>:<version>.
func writeArchive(out, registry, name, version string, idx v1.ImageIndex, at time.Time) error {
	ref := fmt.Sprintf("%s/%s:%s", registry, name, version)
	file := filepath.Join(out, name+".tar")
	if err := images.WriteArchive(file, ref, idx, at); err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	digest, err := idx.Digest()
	if err != nil {
		return err
	}
	fmt.Printf("%s@%s -> %s\n", ref, digest, file)
	return nil
}

func rootfsImage(rootfs, out, registry, name, version string, cmd []string, at time.Time) error {
	platform := v1.Platform{OS: "linux", Architecture: runtime.GOARCH}
	layer := filepath.Join(out, name+".layer.tar")
	defer os.Remove(layer)
	img, err := images.RootfsImage(rootfs, layer, platform, images.Image{
		Cmd:     cmd,
		Env:     []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "LANG=C.UTF-8"},
		Created: at,
	})
	if err != nil {
		return err
	}
	idx := mutate.AppendManifests(mutate.IndexMediaType(empty.Index, types.OCIImageIndex),
		mutate.IndexAddendum{Add: img, Descriptor: v1.Descriptor{Platform: &platform}})
	return writeArchive(out, registry, name, version, idx, at)
}
