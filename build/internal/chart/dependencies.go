package chart

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"

	"sigs.k8s.io/yaml"
)

// Dependency is one of the umbrella chart's dependencies: an upstream chart that lives in
// the Go module a tools/ module pins.
type Dependency struct {
	// Name is the chart's name.
	Name string
	// Tool is the tools/ module that pins Module.
	Tool string
	// Module is the Go module holding charts/<Name>.
	Module string
	// ImageTag is the path, in the umbrella chart's values, of the dependency's image tag.
	ImageTag []string
	// Repository is where upstream publishes the chart (Chart.yaml's repository), so that
	// `helm dependency build` works outside a clone.
	Repository string
}

// Dependencies are JobSet's and Kueue's charts.
var Dependencies = []Dependency{
	{Name: "jobset", Tool: "platform", Module: "sigs.k8s.io/jobset", ImageTag: []string{"jobset", "image", "tag"}, Repository: "oci://registry.k8s.io/jobset/charts"},
	{Name: "kueue", Tool: "platform", Module: "sigs.k8s.io/kueue", ImageTag: []string{"kueue", "controllerManager", "manager", "image", "tag"}, Repository: "oci://registry.k8s.io/kueue/charts"},
}

// ownKeys are the keys of a dependency's values that are the umbrella chart's, not the
// dependency chart's: `install` (its condition) and Helm's `global`.
var ownKeys = map[string]bool{"install": true, "global": true}

// PinnedModule is where and at which version tools/<tool> pins module.
func PinnedModule(root, tool, module string) (version, dir string, err error) {
	run := func(args ...string) ([]byte, error) {
		cmd := exec.Command("go", args...)
		cmd.Dir = filepath.Join(root, "tools", tool)
		// scheduler-library (a Kueue dependency) is unknown to the checksum database; its
		// checksum is pinned in the tool module's go.sum.
		cmd.Env = append(os.Environ(), "GOWORK=off", "GOFLAGS=-mod=readonly", "GONOSUMDB=sigs.k8s.io/scheduler-library")
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			return nil, fmt.Errorf("go %s in tools/%s: %w: %s", strings.Join(args, " "), tool, err, stderr.String())
		}
		return out, nil
	}
	out, err := run("mod", "download", "-json", module)
	if err != nil {
		return "", "", err
	}
	var m struct{ Version, Dir string }
	if err := json.Unmarshal(out, &m); err != nil {
		return "", "", fmt.Errorf("go mod download %s: %w", module, err)
	}
	return m.Version, m.Dir, nil
}

// CheckDependencies fails when the umbrella chart's view of a dependency drifted from the
// version tools/ pins: Chart.yaml's dependency version, the default image tag in values.yaml,
// and values.schema.json's keys for it, which must be the dependency chart's own top-level
// keys (so that a misspelt subchart key fails `helm install`) with their types.
func CheckDependencies(root string) error {
	chartDir := filepath.Join(root, "charts", "kiln")
	var meta struct {
		Dependencies []struct{ Name, Version, Repository string }
	}
	if err := readYAML(filepath.Join(chartDir, "Chart.yaml"), &meta); err != nil {
		return err
	}
	var values map[string]any
	if err := readYAML(filepath.Join(chartDir, "values.yaml"), &values); err != nil {
		return err
	}
	var schema struct {
		Properties map[string]struct {
			Properties map[string]struct {
				Type string `json:"type"`
			} `json:"properties"`
		} `json:"properties"`
	}
	data, err := os.ReadFile(filepath.Join(chartDir, "values.schema.json"))
	if err != nil {
		return err
	}
	if err := json.Unmarshal(data, &schema); err != nil {
		return fmt.Errorf("values.schema.json: %w", err)
	}
	var problems []string
	for _, dep := range Dependencies {
		version, dir, err := PinnedModule(root, dep.Tool, dep.Module)
		if err != nil {
			return err
		}
		chartVersion := strings.TrimPrefix(version, "v")
		found := false
		for _, d := range meta.Dependencies {
			if d.Name == dep.Name {
				found = true
				if d.Version != chartVersion {
					problems = append(problems, fmt.Sprintf("Chart.yaml: dependency %s has version %s; tools/%s pins %s: set it to %s", dep.Name, d.Version, dep.Tool, version, chartVersion))
				}
				if d.Repository != dep.Repository {
					problems = append(problems, fmt.Sprintf("Chart.yaml: dependency %s has repository %q; upstream publishes it at %s: set it", dep.Name, d.Repository, dep.Repository))
				}
			}
		}
		if !found {
			problems = append(problems, fmt.Sprintf("Chart.yaml: no dependency %s (version %s)", dep.Name, chartVersion))
		}
		if tag := lookup(values, dep.ImageTag); tag != version {
			problems = append(problems, fmt.Sprintf("values.yaml: %s is %v; tools/%s pins %s: set it to %s", strings.Join(dep.ImageTag, "."), tag, dep.Tool, version, version))
		}
		var upstream map[string]any
		if err := readYAML(filepath.Join(dir, "charts", dep.Name, "values.yaml"), &upstream); err != nil {
			return err
		}
		listed := schema.Properties[dep.Name].Properties
		for key, v := range upstream {
			prop, ok := listed[key]
			switch {
			case !ok:
				problems = append(problems, fmt.Sprintf("values.schema.json: properties.%s lacks %s, a key of %s's chart: add it (type %q)", dep.Name, key, dep.Name, jsonType(v)))
			case prop.Type != jsonType(v) && v != nil:
				problems = append(problems, fmt.Sprintf("values.schema.json: properties.%s.properties.%s has type %q; in %s's chart it is %q", dep.Name, key, prop.Type, dep.Name, jsonType(v)))
			}
		}
		for key := range listed {
			if _, ok := upstream[key]; !ok && !ownKeys[key] {
				problems = append(problems, fmt.Sprintf("values.schema.json: properties.%s.properties.%s is not a key of %s's chart %s: remove it", dep.Name, key, dep.Name, version))
			}
		}
	}
	if len(problems) > 0 {
		sort.Strings(problems)
		return fmt.Errorf("the chart's dependencies drifted from tools/:\n  %s", strings.Join(problems, "\n  "))
	}
	return nil
}

func readYAML(path string, into any) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	if err := yaml.Unmarshal(data, into); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	return nil
}

func lookup(m map[string]any, path []string) any {
	var v any = m
	for _, k := range path {
		mm, ok := v.(map[string]any)
		if !ok {
			return nil
		}
		v = mm[k]
	}
	return v
}

// jsonType is the JSON schema type of a decoded YAML value.
func jsonType(v any) string {
	switch v.(type) {
	case map[string]any:
		return "object"
	case []any:
		return "array"
	case bool:
		return "boolean"
	case string:
		return "string"
	case float64, int64, int:
		return "number"
	default:
		return ""
	}
}
