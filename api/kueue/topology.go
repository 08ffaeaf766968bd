package kueue

import (
	"cmp"
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	kueuev1beta2 "sigs.k8s.io/kueue/apis/kueue/v1beta2"
)

// Kueue's pod set annotations that ask for topology-aware placement: on a replicated job's
// pod template, their value is a level (node label) of the flavor's Topology.
const (
	AnnotationRequiredTopology  = kueuev1beta2.PodSetRequiredTopologyAnnotation
	AnnotationPreferredTopology = kueuev1beta2.PodSetPreferredTopologyAnnotation
)

// AnnotationLevelNames on a Kueue Topology names its levels for people, comma-separated,
// highest first, e.g. "block,rack,host": `kiln submit --topology rack` and the placement
// Kiln shows use them. Without it, Kiln names the levels whose node labels it knows
// (WellKnownLevels) and shows the others by their label.
const AnnotationLevelNames = "kiln.dev/level-names"

// WellKnownLevels name the topology node labels cloud providers and Kubernetes set. (GKE
// calls a rack a sub-block.) Any other label whose name ends in "rack" or "block" (Kueue's
// examples' cloud.provider.com/topology-rack) is named so too.
var WellKnownLevels = map[string]string{
	"cloud.google.com/gce-topology-block":    "block",
	"cloud.google.com/gce-topology-subblock": "rack",
	"cloud.google.com/gce-topology-host":     "host",
	corev1.LabelTopologyRegion:               "region",
	corev1.LabelTopologyZone:                 "zone",
	corev1.LabelHostname:                     "host",
}

// wellKnownName is what Kiln calls a level with node label nodeLabel without being told, or "".
func wellKnownName(nodeLabel string) string {
	if name, ok := WellKnownLevels[nodeLabel]; ok {
		return name
	}
	_, name, _ := strings.Cut(nodeLabel, "/")
	if name == "" {
		name = nodeLabel
	}
	for _, suffix := range []string{"rack", "block"} {
		if strings.HasSuffix(name, suffix) {
			return suffix
		}
	}
	return ""
}

// Level is one level of a Topology: its name for people and its node label.
type Level struct {
	Name, NodeLabel string
}

// Topology decodes a Topology held as unstructured.
func Topology(u *unstructured.Unstructured) (*kueuev1beta2.Topology, error) {
	return decode[kueuev1beta2.Topology](u)
}

// ResourceFlavor decodes a ResourceFlavor held as unstructured.
func ResourceFlavor(u *unstructured.Unstructured) (*kueuev1beta2.ResourceFlavor, error) {
	return decode[kueuev1beta2.ResourceFlavor](u)
}

// Levels are topo's levels, highest first, named by its AnnotationLevelNames, else by
// WellKnownLevels, else by their node label. A name given twice names only the first level.
func Levels(topo *kueuev1beta2.Topology) []Level {
	var names []string
	if v := topo.Annotations[AnnotationLevelNames]; v != "" {
		names = strings.Split(v, ",")
	}
	out := make([]Level, 0, len(topo.Spec.Levels))
	seen := map[string]bool{}
	for i, l := range topo.Spec.Levels {
		name := ""
		if i < len(names) {
			name = strings.TrimSpace(names[i])
		}
		if name == "" {
			name = wellKnownName(l.NodeLabel)
		}
		if name == "" || seen[name] {
			name = l.NodeLabel
		}
		seen[name] = true
		out = append(out, Level{Name: name, NodeLabel: l.NodeLabel})
	}
	return out
}

// ResolveLevel finds the level asked (a name or a node label) among levels, or says which
// there are.
func ResolveLevel(levels []Level, asked string) (Level, error) {
	for _, l := range levels {
		if l.Name == asked || l.NodeLabel == asked {
			return l, nil
		}
	}
	names := make([]string, 0, len(levels))
	for _, l := range levels {
		if l.Name == l.NodeLabel {
			names = append(names, l.Name)
		} else {
			names = append(names, fmt.Sprintf("%s (%s)", l.Name, l.NodeLabel))
		}
	}
	return Level{}, fmt.Errorf("no level %q: the levels are %s", asked, strings.Join(names, ", "))
}

// LevelName is the name of the level whose node label is nodeLabel among levels, else the
// name Kiln knows for that label, else the label itself.
func LevelName(levels []Level, nodeLabel string) string {
	for _, l := range levels {
		if l.NodeLabel == nodeLabel {
			return l.Name
		}
	}
	return cmp.Or(wellKnownName(nodeLabel), nodeLabel)
}

// Domain is one domain of a TopologyAssignment: its value at each of the assignment's
// levels, and how many pods it was given.
type Domain struct {
	Values []string
	Pods   int32
}

// Domains expands ta's slices (values shared, or given per domain with a common prefix and
// suffix; pod counts likewise) into its domains, in order.
func Domains(ta *kueuev1beta2.TopologyAssignment) ([]Domain, error) {
	if ta == nil {
		return nil, nil
	}
	var out []Domain
	for si, s := range ta.Slices {
		if len(s.ValuesPerLevel) != len(ta.Levels) {
			return nil, fmt.Errorf("slice %d has %d levels' values for %d levels", si, len(s.ValuesPerLevel), len(ta.Levels))
		}
		for d := range int(s.DomainCount) {
			dom := Domain{Values: make([]string, len(ta.Levels))}
			for li, v := range s.ValuesPerLevel {
				switch {
				case v.Universal != nil:
					dom.Values[li] = *v.Universal
				case v.Individual != nil && d < len(v.Individual.Roots):
					iv := v.Individual
					dom.Values[li] = deref(iv.Prefix) + iv.Roots[d] + deref(iv.Suffix)
				default:
					return nil, fmt.Errorf("slice %d level %d has no value for domain %d", si, li, d)
				}
			}
			switch pc := s.PodCounts; {
			case pc.Universal != nil:
				dom.Pods = *pc.Universal
			case d < len(pc.Individual):
				dom.Pods = pc.Individual[d]
			default:
				return nil, fmt.Errorf("slice %d has no pod count for domain %d", si, d)
			}
			out = append(out, dom)
		}
	}
	return out, nil
}

// PlaceDomains gives each domain of an assignment whose levels are assigned (Kueue keeps
// only the hostname when it is the Topology's lowest level) its value at every one of
// levels, highest first: a level the assignment lacks is read from the labels of the
// domain's node (nodeLabels by hostname), empty when the node is unknown.
func PlaceDomains(levels []Level, assigned []string, domains []Domain, nodeLabels func(hostname string) map[string]string) []Domain {
	out := make([]Domain, 0, len(domains))
	for _, d := range domains {
		values := make([]string, len(levels))
		var node map[string]string
		if i := slices.Index(assigned, corev1.LabelHostname); i >= 0 && nodeLabels != nil {
			node = nodeLabels(d.Values[i])
		}
		for li, l := range levels {
			if i := slices.Index(assigned, l.NodeLabel); i >= 0 {
				values[li] = d.Values[i]
			} else {
				values[li] = node[l.NodeLabel]
			}
		}
		out = append(out, Domain{Values: values, Pods: d.Pods})
	}
	return out
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}
