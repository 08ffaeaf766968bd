package addons

import (
	"maps"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"sigs.k8s.io/yaml"
)

// The local platform runs Kueue as the chart installs it: the same integrations and
// concurrency, so that what the e2e suite and the benchmarks measure is what users get.
func TestKueueIsConfiguredAsTheChartConfiguresIt(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("..", "..", "..", "..", "charts", "kiln", "values.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var values struct {
		Kueue struct {
			ManagerConfig struct {
				ControllerManagerConfigYaml string `json:"controllerManagerConfigYaml"`
			} `json:"managerConfig"`
		} `json:"kueue"`
	}
	if err := yaml.Unmarshal(data, &values); err != nil {
		t.Fatal(err)
	}
	var cfg struct {
		Controller struct {
			GroupKindConcurrency map[string]int `json:"groupKindConcurrency"`
		} `json:"controller"`
		Integrations struct {
			Frameworks []string `json:"frameworks"`
		} `json:"integrations"`
	}
	if err := yaml.Unmarshal([]byte(values.Kueue.ManagerConfig.ControllerManagerConfigYaml), &cfg); err != nil {
		t.Fatal(err)
	}
	if got, want := cfg.Integrations.Frameworks, KueueFrameworks; !slices.Equal(got, want) {
		t.Errorf("the chart's Kueue integrations are %v, the platform's %v", got, want)
	}
	if got, want := cfg.Controller.GroupKindConcurrency, KueueConcurrency; !maps.Equal(got, want) {
		t.Errorf("the chart's Kueue groupKindConcurrency is %v, the platform's %v", got, want)
	}
	if cfg.Controller.GroupKindConcurrency["TrainJob.trainer.kubeflow.org"] < 2 {
		t.Error("Kueue's TrainJob reconciler has one worker: a backlog of admitted jobs waits minutes to start")
	}
}
