package kueue

import (
	"reflect"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	kueuev1beta2 "sigs.k8s.io/kueue/apis/kueue/v1beta2"
)

func topology(annotations map[string]string, labels ...string) *kueuev1beta2.Topology {
	t := &kueuev1beta2.Topology{ObjectMeta: metav1.ObjectMeta{Name: "default", Annotations: annotations}}
	for _, l := range labels {
		t.Spec.Levels = append(t.Spec.Levels, kueuev1beta2.TopologyLevel{NodeLabel: l})
	}
	return t
}

func TestLevels(t *testing.T) {
	for _, tc := range []struct {
		name string
		topo *kueuev1beta2.Topology
		want []Level
	}{{
		name: "GKE's labels",
		topo: topology(nil, "cloud.google.com/gce-topology-block", "cloud.google.com/gce-topology-subblock", "kubernetes.io/hostname"),
		want: []Level{{"block", "cloud.google.com/gce-topology-block"}, {"rack", "cloud.google.com/gce-topology-subblock"}, {"host", "kubernetes.io/hostname"}},
	}, {
		name: "Kueue's example labels, by their suffix; an unknown label is its own name",
		topo: topology(nil, "cloud.provider.com/topology-block", "cloud.provider.com/topology-rack", "example.com/pod"),
		want: []Level{{"block", "cloud.provider.com/topology-block"}, {"rack", "cloud.provider.com/topology-rack"}, {"example.com/pod", "example.com/pod"}},
	}, {
		name: "the annotation names levels; a blank one falls back; a name twice names the first level only",
		topo: topology(map[string]string{AnnotationLevelNames: "pod, ,pod"}, "a.io/x", "cloud.google.com/gce-topology-subblock", "b.io/y"),
		want: []Level{{"pod", "a.io/x"}, {"rack", "cloud.google.com/gce-topology-subblock"}, {"b.io/y", "b.io/y"}},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			if got := Levels(tc.topo); !reflect.DeepEqual(got, tc.want) {
				t.Errorf("Levels = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestResolveLevel(t *testing.T) {
	levels := Levels(topology(nil, "cloud.google.com/gce-topology-block", "cloud.google.com/gce-topology-subblock", "kubernetes.io/hostname"))
	for asked, want := range map[string]string{"rack": "cloud.google.com/gce-topology-subblock", "block": "cloud.google.com/gce-topology-block", "kubernetes.io/hostname": "kubernetes.io/hostname"} {
		got, err := ResolveLevel(levels, asked)
		if err != nil || got.NodeLabel != want {
			t.Errorf("ResolveLevel(%q) = %v, %v; want %s", asked, got, err, want)
		}
	}
	_, err := ResolveLevel(levels, "zone")
	if err == nil || !strings.Contains(err.Error(), `no level "zone": the levels are block (cloud.google.com/gce-topology-block), rack (cloud.google.com/gce-topology-subblock), host (kubernetes.io/hostname)`) {
		t.Errorf("ResolveLevel(zone) error = %v", err)
	}
}

func TestDomains(t *testing.T) {
	ta := &kueuev1beta2.TopologyAssignment{
		Levels: []string{"kubernetes.io/hostname"},
		Slices: []kueuev1beta2.TopologyAssignmentSlice{{
			DomainCount: 3,
			ValuesPerLevel: []kueuev1beta2.TopologyAssignmentSliceLevelValues{{Individual: &kueuev1beta2.TopologyAssignmentSliceLevelIndividualValues{
				Prefix: ptr.To("kwok-tas-b0-r1-"), Roots: []string{"0", "1", "3"},
			}}},
			PodCounts: kueuev1beta2.TopologyAssignmentSlicePodCounts{Individual: []int32{2, 1, 1}},
		}, {
			DomainCount:    1,
			ValuesPerLevel: []kueuev1beta2.TopologyAssignmentSliceLevelValues{{Universal: ptr.To("other")}},
			PodCounts:      kueuev1beta2.TopologyAssignmentSlicePodCounts{Universal: ptr.To[int32](4)},
		}},
	}
	got, err := Domains(ta)
	if err != nil {
		t.Fatal(err)
	}
	want := []Domain{{[]string{"kwok-tas-b0-r1-0"}, 2}, {[]string{"kwok-tas-b0-r1-1"}, 1}, {[]string{"kwok-tas-b0-r1-3"}, 1}, {[]string{"other"}, 4}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("Domains = %v, want %v", got, want)
	}

	ta.Slices[0].PodCounts = kueuev1beta2.TopologyAssignmentSlicePodCounts{Individual: []int32{1}}
	if _, err := Domains(ta); err == nil {
		t.Error("Domains accepted a slice with fewer pod counts than domains")
	}

	levels := Levels(topology(nil, "cloud.google.com/gce-topology-block", "cloud.google.com/gce-topology-subblock", "kubernetes.io/hostname"))
	nodes := map[string]map[string]string{"kwok-tas-b0-r1-0": {"cloud.google.com/gce-topology-block": "b0", "cloud.google.com/gce-topology-subblock": "b0-r1"}}
	placed := PlaceDomains(levels, ta.Levels, want[:2], func(h string) map[string]string { return nodes[h] })
	wantPlaced := []Domain{{[]string{"b0", "b0-r1", "kwok-tas-b0-r1-0"}, 2}, {[]string{"", "", "kwok-tas-b0-r1-1"}, 1}}
	if !reflect.DeepEqual(placed, wantPlaced) {
		t.Errorf("PlaceDomains = %v, want %v", placed, wantPlaced)
	}
}
