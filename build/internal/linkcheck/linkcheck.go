// Package linkcheck finds the broken links of a tree's Markdown files: a relative link to a
// file that does not exist, or to a heading (#anchor) its target does not have. Links to
// other sites are left alone: nothing here may reach them.
package linkcheck

import (
	"bufio"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"strings"
	"unicode"
)

// Broken is one broken link: where it is, what it names, and why it fails.
type Broken struct {
	File   string
	Line   int
	Target string
	Why    string
}

func (b Broken) String() string { return fmt.Sprintf("%s:%d: %s: %s", b.File, b.Line, b.Target, b.Why) }

// link is a Markdown inline link or image: [text](target "title") or ![alt](target).
var link = regexp.MustCompile(`\]\(([^)\s]+)(?:\s+"[^"]*")?\)`)

// Check reads every Markdown file under root, except in the directories skip names (by
// their path from root), and returns the broken links in the order found.
func Check(root string, skip []string) ([]Broken, error) {
	var out []Broken
	anchors := map[string]map[string]bool{}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		if d.IsDir() {
			for _, s := range skip {
				if rel == s {
					return filepath.SkipDir
				}
			}
			if name := d.Name(); rel != "." && (strings.HasPrefix(name, ".") || name == "node_modules") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(p, ".md") {
			return nil
		}
		found, err := checkFile(root, rel, anchors)
		out = append(out, found...)
		return err
	})
	return out, err
}

func checkFile(root, rel string, anchors map[string]map[string]bool) ([]Broken, error) {
	f, err := os.Open(filepath.Join(root, rel))
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []Broken
	fence := false
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		if strings.HasPrefix(strings.TrimSpace(line), "```") {
			fence = !fence
			continue
		}
		if fence {
			continue
		}
		for _, m := range link.FindAllStringSubmatch(stripCode(line), -1) {
			if why := checkTarget(root, rel, m[1], anchors); why != "" {
				out = append(out, Broken{File: rel, Line: n, Target: m[1], Why: why})
			}
		}
	}
	return out, sc.Err()
}

// stripCode blanks `inline code`, where brackets are not links.
func stripCode(line string) string {
	var b strings.Builder
	in := false
	for _, r := range line {
		if r == '`' {
			in = !in
			continue
		}
		if !in {
			b.WriteRune(r)
		}
	}
	return b.String()
}

// checkTarget says why target, linked from file rel, is broken ("" when it is not).
func checkTarget(root, rel, target string, anchors map[string]map[string]bool) string {
	if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
		return ""
	}
	file, anchor, _ := strings.Cut(target, "#")
	dest := rel
	if file != "" {
		dest = path.Join(path.Dir(filepath.ToSlash(rel)), file)
		if strings.HasPrefix(dest, "../") {
			return "" // outside the tree (e.g. ../shared)
		}
		st, err := os.Stat(filepath.Join(root, dest))
		if err != nil {
			return "no such file or directory"
		}
		if st.IsDir() || anchor == "" {
			return ""
		}
	}
	if anchor == "" || !strings.HasSuffix(dest, ".md") {
		return ""
	}
	as, ok := anchors[dest]
	if !ok {
		var err error
		if as, err = headings(filepath.Join(root, dest)); err != nil {
			return err.Error()
		}
		anchors[dest] = as
	}
	if !as[anchor] {
		return fmt.Sprintf("%s has no heading #%s", dest, anchor)
	}
	return ""
}

// headings are the anchors GitHub gives a Markdown file's headings (and explicit <a
// name="..."> / id="..." targets), with -1, -2 for repeats.
func headings(file string) (map[string]bool, error) {
	data, err := os.ReadFile(file)
	if err != nil {
		return nil, err
	}
	out := map[string]bool{}
	seen := map[string]int{}
	fence := false
	explicit := regexp.MustCompile(`(?:name|id)="([^"]+)"`)
	for _, line := range strings.Split(string(data), "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "```") {
			fence = !fence
			continue
		}
		for _, m := range explicit.FindAllStringSubmatch(line, -1) {
			out[m[1]] = true
		}
		if fence || !strings.HasPrefix(line, "#") {
			continue
		}
		text := strings.TrimSpace(strings.TrimLeft(line, "#"))
		a := Slug(text)
		if n := seen[a]; n > 0 {
			out[fmt.Sprintf("%s-%d", a, n)] = true
		} else {
			out[a] = true
		}
		seen[a]++
	}
	return out, nil
}

// Slug is GitHub's anchor for a heading: lower case, letters, digits, spaces as hyphens,
// hyphens and underscores kept, everything else dropped.
func Slug(heading string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(heading) {
		switch {
		case unicode.IsLetter(r) || unicode.IsDigit(r) || r == '-' || r == '_':
			b.WriteRune(r)
		case r == ' ':
			b.WriteRune('-')
		}
	}
	return b.String()
}
