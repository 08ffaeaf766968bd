// Package release assembles a Kiln release (`make release VERSION=vX.Y.Z`): one version,
// stamped on the chart, the SDK packages and the images, with checksums and notes.
package release

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
)

var versionRE = regexp.MustCompile(`^v(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)(-[0-9A-Za-z.-]+)?$`)

// PackageVersion is a release's version without its v: vX.Y.Z is what the images and the Go
// module are tagged, X.Y.Z what the chart, the wheel and the npm package are versioned.
func PackageVersion(version string) (string, error) {
	if !versionRE.MatchString(version) {
		return "", fmt.Errorf("VERSION=%q: want vMAJOR.MINOR.PATCH, e.g. v0.2.0 (or v0.2.0-rc.1)", version)
	}
	return strings.TrimPrefix(version, "v"), nil
}

// CopyTree copies the directory src to dst, leaving out the directories named in skip.
func CopyTree(src, dst string, skip ...string) error {
	return filepath.WalkDir(src, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(src, path)
		if err != nil {
			return err
		}
		target := filepath.Join(dst, rel)
		if d.IsDir() {
			for _, s := range skip {
				if d.Name() == s && rel != "." {
					return filepath.SkipDir
				}
			}
			return os.MkdirAll(target, 0o755)
		}
		if !d.Type().IsRegular() {
			return nil
		}
		return CopyFile(path, target)
	})
}

// CopyFile copies the file from to the file to, with its permissions.
func CopyFile(from, to string) error {
	in, err := os.Open(from)
	if err != nil {
		return err
	}
	defer in.Close()
	info, err := in.Stat()
	if err != nil {
		return err
	}
	out, err := os.OpenFile(to, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, info.Mode().Perm())
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

// Stamp rewrites, in file, each line that the pattern matches (its first group is kept,
// the rest replaced with value), and fails unless it matched exactly want lines.
func Stamp(file, pattern, value string, want int) error {
	data, err := os.ReadFile(file)
	if err != nil {
		return err
	}
	re := regexp.MustCompile(pattern)
	n := 0
	out := re.ReplaceAllStringFunc(string(data), func(m string) string {
		n++
		return re.FindStringSubmatch(m)[1] + value
	})
	if n != want {
		return fmt.Errorf("%s: %d lines match %s, want %d", file, n, pattern, want)
	}
	return os.WriteFile(file, []byte(out), 0o644)
}

// StampChart stamps a copy of the chart with version (X.Y.Z) as its version and appVersion.
func StampChart(chartDir, version string) error {
	chart := filepath.Join(chartDir, "Chart.yaml")
	if err := Stamp(chart, `(?m)^(version: ).*$`, version, 1); err != nil {
		return err
	}
	return Stamp(chart, `(?m)^(appVersion: ).*$`, fmt.Sprintf("%q", version), 1)
}

// Checksums writes SHA256SUMS in dir: one line per file below it (sha256sum's format, paths
// relative to dir, sorted), and returns its text.
func Checksums(dir string) (string, error) {
	var lines []string
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || d.Name() == "SHA256SUMS" {
			return err
		}
		f, err := os.Open(path)
		if err != nil {
			return err
		}
		defer f.Close()
		h := sha256.New()
		if _, err := io.Copy(h, f); err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, path)
		lines = append(lines, hex.EncodeToString(h.Sum(nil))+"  "+filepath.ToSlash(rel))
		return nil
	})
	if err != nil {
		return "", err
	}
	sort.Slice(lines, func(i, j int) bool { return lines[i][66:] < lines[j][66:] })
	text := strings.Join(lines, "\n") + "\n"
	return text, os.WriteFile(filepath.Join(dir, "SHA256SUMS"), []byte(text), 0o644)
}

// Changes are the commits of repo since the release tag before version (all of them when
// there is none): the previous tag's name, and one "subject (short hash)" per commit, newest
// first.
func Changes(repo, version string) (previous string, commits []string, err error) {
	git := func(args ...string) (string, error) {
		cmd := exec.Command("git", args...)
		cmd.Dir = repo
		out, err := cmd.Output()
		if err != nil {
			var ee *exec.ExitError
			if errors.As(err, &ee) {
				return "", fmt.Errorf("git %s: %w: %s", strings.Join(args, " "), err, ee.Stderr)
			}
			return "", err
		}
		return strings.TrimSpace(string(out)), nil
	}
	tags, err := git("tag", "--list", "v*", "--merged", "HEAD", "--sort=-v:refname")
	if err != nil {
		return "", nil, err
	}
	for _, t := range strings.Fields(tags) {
		if t != version && versionRE.MatchString(t) {
			previous = t
			break
		}
	}
	span := "HEAD"
	if previous != "" {
		span = previous + "..HEAD"
	}
	log, err := git("log", "--no-merges", "--format=%s (%h)", span)
	if err != nil {
		return "", nil, err
	}
	if log != "" {
		commits = strings.Split(log, "\n")
	}
	return previous, commits, nil
}

// Notes are a release's notes: the commits since the previous release, and its artifacts
// (the images by digest, the chart, the CLI binaries, the SDK packages) with how to install.
func Notes(version, previous string, commits []string, digests map[string]string, cli []string) string {
	pv := strings.TrimPrefix(version, "v")
	var b strings.Builder
	fmt.Fprintf(&b, "# Kiln %s\n\n", version)
	since := "the first commit"
	if previous != "" {
		since = previous
	}
	fmt.Fprintf(&b, "## Changes since %s (%d commits)\n\n", since, len(commits))
	for _, c := range commits {
		fmt.Fprintf(&b, "- %s\n", c)
	}
	b.WriteString("\n## Install\n\n```sh\n")
	fmt.Fprintf(&b, "helm install kiln oci://<registry>/charts/kiln --version %s \\\n", pv)
	b.WriteString("  --namespace kiln-system --create-namespace --wait \\\n")
	b.WriteString("  --set operator.image.registry=<registry>/kiln --set apiserver.image.registry=<registry>/kiln --set tests.image.registry=<registry>/kiln\n")
	b.WriteString("helm test kiln --namespace kiln-system\n```\n\n")
	b.WriteString("`make release-push VERSION=" + version + " REGISTRY=<registry>` pushes the images (as `<registry>/kiln/<name>:" + version + "`) and the chart (`oci://<registry>/charts/kiln`).\n\n")
	b.WriteString("## Artifacts\n\n| artifact | |\n|---|---|\n")
	names := make([]string, 0, len(digests))
	for n := range digests {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		fmt.Fprintf(&b, "| image `%s:%s` | `%s` (linux/amd64, linux/arm64; `images/%s.tar`, SBOM `images/%s.cdx.json`) |\n", n, version, digests[n], n, n)
	}
	fmt.Fprintf(&b, "| chart `kiln-%s.tgz` | version and appVersion %s, JobSet's and Kueue's charts included |\n", pv, pv)
	for _, c := range cli {
		fmt.Fprintf(&b, "| CLI `cli/%s` | `kiln version` prints %s |\n", c, version)
	}
	fmt.Fprintf(&b, "| SDKs `sdk/` | Python `kiln_sdk-%s` wheel and sdist, npm `kiln-ml-sdk-%s.tgz`; Go: `go get github.com/kiln-ml/kiln/sdk-gen/go@%s` once the tag `sdk-gen/go/%s` is pushed |\n", pv, pv, version, version)
	b.WriteString("\n`SHA256SUMS` has the checksum of every file.\n")
	return b.String()
}
