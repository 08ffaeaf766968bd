package chart

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kiln-ml/kiln/api/testing/pinned"
)

// copyRoot is a repository root holding a copy of charts/kiln's Chart.yaml, values.yaml and
// values.schema.json, and the real tools/.
func copyRoot(t *testing.T) (string, string) {
	t.Helper()
	root, err := pinned.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	tmp := t.TempDir()
	chart := filepath.Join(tmp, "charts", "kiln")
	if err := os.MkdirAll(chart, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"Chart.yaml", "values.yaml", "values.schema.json"} {
		data, err := os.ReadFile(filepath.Join(root, "charts", "kiln", f))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(chart, f), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink(filepath.Join(root, "tools"), filepath.Join(tmp, "tools")); err != nil {
		t.Fatal(err)
	}
	return tmp, chart
}

func edit(t *testing.T, path, from, to string) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(data), from) {
		t.Fatalf("%s has no %q", path, from)
	}
	if err := os.WriteFile(path, []byte(strings.Replace(string(data), from, to, 1)), 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestCheckDependencies(t *testing.T) {
	root, _ := copyRoot(t)
	if err := CheckDependencies(root); err != nil {
		t.Fatalf("the committed chart: %v", err)
	}

	root, chart := copyRoot(t)
	edit(t, filepath.Join(chart, "Chart.yaml"), "version: 0.12.0", "version: 0.11.0")
	edit(t, filepath.Join(chart, "Chart.yaml"), "repository: oci://registry.k8s.io/kueue/charts", "repository: file://../kueue")
	edit(t, filepath.Join(chart, "values.yaml"), "tag: v0.19.0", "tag: release-0.19")
	schemaPath := filepath.Join(chart, "values.schema.json")
	var schema map[string]any
	data, _ := os.ReadFile(schemaPath)
	if err := json.Unmarshal(data, &schema); err != nil {
		t.Fatal(err)
	}
	jobset := schema["properties"].(map[string]any)["jobset"].(map[string]any)["properties"].(map[string]any)
	delete(jobset, "controller")
	jobset["enabled"] = map[string]any{"type": "boolean"}
	jobset["image"] = map[string]any{"type": "string"}
	data, _ = json.Marshal(schema)
	if err := os.WriteFile(schemaPath, data, 0o644); err != nil {
		t.Fatal(err)
	}
	err := CheckDependencies(root)
	if err == nil {
		t.Fatal("drift went unnoticed")
	}
	for _, want := range []string{
		"Chart.yaml: dependency jobset has version 0.11.0; tools/platform pins v0.12.0: set it to 0.12.0",
		`Chart.yaml: dependency kueue has repository "file://../kueue"; upstream publishes it at oci://registry.k8s.io/kueue/charts: set it`,
		"values.yaml: kueue.controllerManager.manager.image.tag is release-0.19; tools/platform pins v0.19.0",
		"properties.jobset lacks controller, a key of jobset's chart",
		"properties.jobset.properties.enabled is not a key of jobset's chart",
		`properties.jobset.properties.image has type "string"; in jobset's chart it is "object"`,
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the error lacks %q:\n%v", want, err)
		}
	}
}

// TestReadmeDescribesEveryValue: the chart's README (helm-docs, from values.yaml's `# --`
// comments) says what each value it lists is for.
func TestReadmeDescribesEveryValue(t *testing.T) {
	root, err := pinned.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(filepath.Join(root, "charts", "kiln", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, values, ok := strings.Cut(string(data), "\n## Values\n")
	if !ok {
		t.Fatal("charts/kiln/README.md has no Values section: run make generate")
	}
	rows := 0
	for _, line := range strings.Split(values, "\n") {
		cells := strings.Split(line, "|")
		if len(cells) != 6 || strings.HasPrefix(line, "|-") || strings.TrimSpace(cells[1]) == "Key" {
			continue
		}
		rows++
		if strings.TrimSpace(cells[4]) == "" {
			t.Errorf("value %s has no description: give it a `# --` comment in charts/kiln/values.yaml, then make generate", strings.TrimSpace(cells[1]))
		}
	}
	if rows < 50 {
		t.Errorf("the README lists %d values; want them all", rows)
	}
}
