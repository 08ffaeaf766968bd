// Command kiln-release assembles release VERSION in --out, after `make release` built its
// images (bin/images, tagged VERSION) and its CLI binaries (<out>/cli): the chart stamped
// X.Y.Z and packaged with its dependencies, the Python SDK's wheel and sdist and the
// TypeScript SDK's npm tarball stamped X.Y.Z, the image archives with a CycloneDX SBOM each,
// release notes from the
// commits since the previous release tag, and SHA256SUMS over all of it.
package main

import (
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"

	"github.com/kiln-ml/kiln/build/images"
	"github.com/kiln-ml/kiln/build/internal/chart"
	"github.com/kiln-ml/kiln/build/internal/release"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintf(os.Stderr, "kiln-release: %v\n", err)
		os.Exit(1)
	}
}

func run() error {
	version := flag.String("version", "", "the release, vX.Y.Z")
	out := flag.String("out", "", "directory to assemble the release in (its cli/ holds the CLI binaries)")
	root := flag.String("root", ".", "the repository")
	imagesDir := flag.String("images", "bin/images", "where `make images` wrote the image archives")
	helm := flag.String("helm", "bin/helm", "the helm binary")
	flag.Parse()
	pv, err := release.PackageVersion(*version)
	if err != nil {
		return err
	}
	if *out == "" {
		return fmt.Errorf("--out: name the release's directory")
	}
	tmp, err := os.MkdirTemp("", "kiln-release-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	run := func(dir string, env []string, name string, args ...string) error {
		cmd := exec.Command(name, args...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), env...)
		if b, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("%s %s: %w\n%s", name, strings.Join(args, " "), err, b)
		}
		return nil
	}
	abs := func(p string) string { a, _ := filepath.Abs(p); return a }
	outDir := abs(*out)

	// The chart, with its dependencies (make chart-deps), stamped X.Y.Z.
	chartSrc := filepath.Join(*root, "charts", "kiln")
	for _, dep := range chart.Dependencies {
		if _, err := os.Stat(filepath.Join(chartSrc, "charts", dep.Name, "Chart.yaml")); err != nil {
			return fmt.Errorf("the chart's dependency %s is missing: run make chart-deps", dep.Name)
		}
	}
	chartDir := filepath.Join(tmp, "kiln")
	if err := release.CopyTree(chartSrc, chartDir); err != nil {
		return err
	}
	if err := release.StampChart(chartDir, pv); err != nil {
		return err
	}
	if err := run(".", nil, abs(*helm), "package", chartDir, "--destination", outDir); err != nil {
		return err
	}

	// The Python SDK: its wheel and sdist, by its own standard-library build backend.
	sdk := filepath.Join(outDir, "sdk")
	if err := os.MkdirAll(sdk, 0o755); err != nil {
		return err
	}
	py := filepath.Join(tmp, "python")
	if err := release.CopyTree(filepath.Join(*root, "sdk-gen", "python"), py, "__pycache__", "tests"); err != nil {
		return err
	}
	if err := release.Stamp(filepath.Join(py, "pyproject.toml"), `(?m)^(version = ).*$`, fmt.Sprintf("%q", pv), 1); err != nil {
		return err
	}
	if err := release.Stamp(filepath.Join(py, "kiln", "__init__.py"), `(?m)^(__version__ = ).*$`, fmt.Sprintf("%q", pv), 1); err != nil {
		return err
	}
	build := fmt.Sprintf("import kiln_build; kiln_build.build_wheel(%q); kiln_build.build_sdist(%q)", sdk, sdk)
	if err := run(py, []string{"PYTHONPATH=_build"}, "python3", "-c", build); err != nil {
		return err
	}

	// The TypeScript SDK, built before (make sdk), packed as npm would publish it.
	ts := filepath.Join(tmp, "typescript")
	if err := release.CopyTree(filepath.Join(*root, "sdk-gen", "typescript"), ts, "node_modules"); err != nil {
		return err
	}
	if _, err := os.Stat(filepath.Join(ts, "dist", "src", "index.js")); err != nil {
		return fmt.Errorf("the TypeScript SDK is not built: run make sdk")
	}
	if err := release.Stamp(filepath.Join(ts, "package.json"), `(?m)^(  "version": ).*$`, fmt.Sprintf("%q,", pv), 1); err != nil {
		return err
	}
	if err := run(ts, nil, "npm", "pack", "--ignore-scripts", "--pack-destination", sdk); err != nil {
		return err
	}

	// The images, tagged VERSION by make images.
	imgDir := filepath.Join(outDir, "images")
	if err := os.MkdirAll(imgDir, 0o755); err != nil {
		return err
	}
	// Every image is built on base, which holds Debian's CA certificates (make images).
	caVersion, err := exec.Command("dpkg-query", "-W", "-f", "${Version}", "ca-certificates").Output()
	if err != nil {
		return fmt.Errorf("the version of Debian's ca-certificates, which the base image holds: dpkg-query: %w", err)
	}
	base := []release.Package{{Name: "ca-certificates", Version: string(caVersion), PURL: "pkg:deb/debian/ca-certificates@" + string(caVersion)}}
	digests := map[string]string{}
	for _, img := range images.Kiln {
		name := img.Name
		archive := filepath.Join(*imagesDir, name+".tar")
		ref, err := images.ArchiveRef(archive)
		if err != nil {
			return fmt.Errorf("%w (make release builds them: make images KILN_VERSION=%s)", err, *version)
		}
		if !strings.HasSuffix(ref, ":"+*version) {
			return fmt.Errorf("%s is %s, not of %s: make images KILN_VERSION=%s", archive, ref, *version, *version)
		}
		idx, done, err := images.OpenArchive(archive)
		if err != nil {
			return err
		}
		d, err := idx.Digest()
		done()
		if err != nil {
			return err
		}
		digests[name] = d.String()
		if err := release.CopyFile(archive, filepath.Join(imgDir, name+".tar")); err != nil {
			return err
		}
		binary := ""
		if img.Binary != "" {
			binary = filepath.Join(*imagesDir, "build", "linux_amd64", img.Binary)
		}
		sbom, err := release.SBOM(name, *version, d.String(), binary, base)
		if err != nil {
			return fmt.Errorf("the SBOM of %s: %w", name, err)
		}
		if err := os.WriteFile(filepath.Join(imgDir, name+".cdx.json"), sbom, 0o644); err != nil {
			return err
		}
	}
	cli, _ := filepath.Glob(filepath.Join(outDir, "cli", "kiln-*"))
	if len(cli) == 0 {
		return fmt.Errorf("no CLI binaries in %s/cli (make release builds them)", outDir)
	}

	previous, commits, err := release.Changes(*root, *version)
	if err != nil {
		return err
	}
	notes := release.Notes(*version, previous, commits, digests, cliNames(cli))
	if err := os.WriteFile(filepath.Join(outDir, "RELEASE-NOTES.md"), []byte(notes), 0o644); err != nil {
		return err
	}
	if _, err := release.Checksums(outDir); err != nil {
		return err
	}
	fmt.Printf("release %s in %s: chart kiln-%s.tgz, %d images, %d CLI binaries, SDK packages, RELEASE-NOTES.md, SHA256SUMS\n",
		*version, outDir, pv, len(images.Kiln), len(cli))
	return nil
}

func cliNames(paths []string) []string {
	var names []string
	for _, p := range paths {
		names = append(names, filepath.Base(p))
	}
	sort.Strings(names)
	return names
}
