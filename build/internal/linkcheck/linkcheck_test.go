package linkcheck

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestCheck(t *testing.T) {
	root := t.TempDir()
	files := map[string]string{
		"README.md": "# Kiln\n[docs](docs/a.md) [anchor](docs/a.md#the-first-jobs) [missing](docs/none.md)\n" +
			"[bad anchor](docs/a.md#nowhere) [web](https://example.com/x) [dir](docs/) [outside](../shared/x.md)\n" +
			"`[not a link](nowhere.md)`\n```\n[in a fence](nowhere.md)\n```\n",
		"docs/a.md":         "# The first jobs\n## `kiln submit`, step 1\n## Again\n## Again\n[self](#again-1) [up](../README.md#kiln) [code](#kiln-submit-step-1) [gone](#gone)\n",
		"skipped/b.md":      "[x](nowhere.md)\n",
		"node_modules/c.md": "[x](nowhere.md)\n",
	}
	for name, body := range files {
		p := filepath.Join(root, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	got, err := Check(root, []string{"skipped"})
	if err != nil {
		t.Fatal(err)
	}
	want := []Broken{
		{File: "README.md", Line: 2, Target: "docs/none.md", Why: "no such file or directory"},
		{File: "README.md", Line: 3, Target: "docs/a.md#nowhere", Why: "docs/a.md has no heading #nowhere"},
		{File: "docs/a.md", Line: 5, Target: "#gone", Why: "docs/a.md has no heading #gone"},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("broken links (-want +got):\n%s", diff)
	}
}
