package platform

import (
	"os"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

func TestFromEnv(t *testing.T) {
	cases := map[string]struct {
		env     map[string]string
		want    func(*Config)
		wantErr bool
	}{
		"defaults": {want: func(*Config) {}},
		"resized fleet": {
			env: map[string]string{EnvGPUNodes: "2", EnvSpotNodes: "0", EnvGPUsPerNode: "4", EnvNodeMemory: "64Gi", EnvPodRunDuration: "500ms"},
			want: func(c *Config) {
				c.GPUNodes, c.SpotNodes, c.GPUsPerNode, c.NodeMemory, c.PodRunDuration = 2, 0, 4, "64Gi", 500*time.Millisecond
			},
		},
		"negative count": {env: map[string]string{EnvGPUNodes: "-1"}, wantErr: true},
		"not a duration": {env: map[string]string{EnvPodRunDuration: "5"}, wantErr: true},
		"not a port":     {env: map[string]string{EnvAPIServerPort: "x"}, wantErr: true},
		"chart install without the real node": {
			env:  map[string]string{EnvInstall: "chart", EnvRealNodes: "0", EnvTrainer: "upstream"},
			want: func(c *Config) { c.Install, c.RealNodes, c.Trainer = InstallChart, 0, TrainerUpstream },
		},
		"unknown install":        {env: map[string]string{EnvInstall: "helm"}, wantErr: true},
		"unknown trainer":        {env: map[string]string{EnvTrainer: "kubeflow"}, wantErr: true},
		"two real nodes":         {env: map[string]string{EnvRealNodes: "2"}, wantErr: true},
		"two workers":            {env: map[string]string{EnvWorkers: "2"}, want: func(c *Config) { c.Workers = 2 }},
		"too many workers":       {env: map[string]string{EnvWorkers: "9"}, wantErr: true},
		"workers with the chart": {env: map[string]string{EnvWorkers: "1", EnvInstall: "chart"}, wantErr: true},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			for _, k := range []string{EnvGPUNodes, EnvSpotNodes, EnvGPUsPerNode, EnvNodeCPU, EnvNodeMemory, EnvPodRunDuration, EnvAPIServerPort, EnvInstall, EnvRealNodes, EnvTrainer, EnvTASBlocks, EnvTASRacks, EnvTASNodes, EnvWorkers} {
				t.Setenv(k, "") // restored after the test
				os.Unsetenv(k)
			}
			for k, v := range tc.env {
				t.Setenv(k, v)
			}
			base := DefaultConfig("/repo")
			got, err := base.FromEnv()
			if tc.wantErr {
				if err == nil {
					t.Fatal("want an error")
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			want := DefaultConfig("/repo")
			tc.want(&want)
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("FromEnv() mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestQueueQuotaIsFleetCapacity(t *testing.T) {
	c := DefaultConfig("/repo")
	c.GPUNodes, c.SpotNodes, c.GPUsPerNode, c.NodeCPU, c.NodeMemory = 4, 2, 8, "32", "256Gi"
	objs, err := c.Queues()
	if err != nil {
		t.Fatal(err)
	}
	flavorsOf := map[string][]any{}
	for _, o := range objs {
		if o.GetKind() == "ClusterQueue" {
			groups, _, _ := unstructured.NestedSlice(o.Object, "spec", "resourceGroups")
			flavorsOf[o.GetName()], _, _ = unstructured.NestedSlice(groups[0].(map[string]any), "flavors")
		}
	}
	flavors := flavorsOf[ClusterQueueName]
	want := []any{
		map[string]any{"name": "gpu", "resources": []any{
			map[string]any{"name": "cpu", "nominalQuota": "128"},
			map[string]any{"name": "memory", "nominalQuota": "1Ti"},
			map[string]any{"name": "nvidia.com/gpu", "nominalQuota": "32"},
		}},
		map[string]any{"name": "gpu-spot", "resources": []any{
			map[string]any{"name": "cpu", "nominalQuota": "64"},
			map[string]any{"name": "memory", "nominalQuota": "512Gi"},
			map[string]any{"name": "nvidia.com/gpu", "nominalQuota": "16"},
		}},
	}
	if diff := cmp.Diff(want, flavors); diff != "" {
		t.Errorf("ClusterQueue flavors mismatch (-want +got):\n%s", diff)
	}
	// The topology-aware pool: 2 blocks × 2 racks × 4 nodes.
	wantTAS := []any{map[string]any{"name": "gpu-tas", "resources": []any{
		map[string]any{"name": "cpu", "nominalQuota": "512"},
		map[string]any{"name": "memory", "nominalQuota": "4Ti"},
		map[string]any{"name": "nvidia.com/gpu", "nominalQuota": "128"},
	}}}
	if diff := cmp.Diff(wantTAS, flavorsOf[TASClusterQueue]); diff != "" {
		t.Errorf("TAS ClusterQueue flavors mismatch (-want +got):\n%s", diff)
	}
}

func TestTopologyPoolIsLabelledAsGKELabelsIt(t *testing.T) {
	c := DefaultConfig("/repo")
	racks := map[string]map[string]bool{}
	n := 0
	for _, node := range c.Nodes() {
		l := node.GetLabels()
		if l[LabelNodePool] != NodePoolTAS {
			continue
		}
		n++
		taints, _, _ := unstructured.NestedSlice(node.Object, "spec", "taints")
		if len(taints) != 1 || taints[0].(map[string]any)["value"] != NodePoolTAS {
			t.Errorf("%s: taints %v, want kiln.dev/node-pool=gpu-tas:NoSchedule", node.GetName(), taints)
		}
		rack := l[LabelTopologyRack]
		if racks[rack] == nil {
			racks[rack] = map[string]bool{}
		}
		racks[rack][l[LabelTopologyBlock]] = true
	}
	if n != 16 || len(racks) != 4 {
		t.Fatalf("%d nodes in %d racks, want 16 in 4", n, len(racks))
	}
	for rack, blocks := range racks {
		if len(blocks) != 1 {
			t.Errorf("rack %s is in blocks %v, want one", rack, blocks)
		}
	}
	c.TASBlocks = 0
	objs, err := c.Queues()
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range objs {
		if o.GetKind() == "Topology" || o.GetName() == TASClusterQueue {
			t.Errorf("no TAS pool, yet %s %s", o.GetKind(), o.GetName())
		}
	}
}

func TestQueuesRejectBadNodeSize(t *testing.T) {
	c := DefaultConfig("/repo")
	c.NodeMemory = "lots"
	if _, err := c.Queues(); err == nil {
		t.Fatal("want an error naming the bad memory size")
	}
}
