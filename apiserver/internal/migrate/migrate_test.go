package migrate

import (
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/kiln-ml/kiln/runtimes"
)

var update = flag.Bool("update", false, "rewrite the golden files")

// render is a conversion's output as `kiln convert` will print it: the objects as YAML
// documents, then the notes and warnings.
func render(t *testing.T, res *Result) string {
	t.Helper()
	var b strings.Builder
	for i, o := range res.Objects {
		if i > 0 {
			b.WriteString("---\n")
		}
		data, err := YAML(o)
		if err != nil {
			t.Fatal(err)
		}
		b.Write(data)
	}
	for _, w := range res.Warnings {
		kind := "warning"
		if w.Note {
			kind = "note"
		}
		b.WriteString("# " + kind + ": " + w.String() + "\n")
	}
	return b.String()
}

// Each testdata/*.yaml converts to the golden beside it (go test -update rewrites them).
func TestConvertGolden(t *testing.T) {
	inputs, err := filepath.Glob("testdata/*.yaml")
	if err != nil || len(inputs) == 0 {
		t.Fatalf("no inputs: %v", err)
	}
	for _, in := range inputs {
		t.Run(filepath.Base(in), func(t *testing.T) {
			data, err := os.ReadFile(in)
			if err != nil {
				t.Fatal(err)
			}
			res, err := Convert(data, Options{RuntimeJobs: catalogJobs(t)})
			if err != nil {
				t.Fatal(err)
			}
			got := render(t, res)
			golden := strings.TrimSuffix(in, ".yaml") + ".golden"
			if *update {
				if err := os.WriteFile(golden, []byte(got), 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(string(want), got); diff != "" {
				t.Errorf("conversion of %s (-want +got):\n%s", in, diff)
			}
		})
	}
}

func TestConvertRefuses(t *testing.T) {
	for name, tc := range map[string]struct{ doc, want string }{
		"another kind":    {"apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: web}\n", `document 1: apps/v1 Deployment "web": not a kind kiln convert takes`},
		"no name":         {"apiVersion: kubeflow.org/v1\nkind: PyTorchJob\nspec: {pytorchReplicaSpecs: {Worker: {template: {spec: {containers: [{name: pytorch, image: x}]}}}}}\n", "metadata.name: a PyTorchJob needs a name"},
		"no replicas":     {"apiVersion: kubeflow.org/v1\nkind: PyTorchJob\nmetadata: {name: j}\nspec: {}\n", "spec.pytorchReplicaSpecs: no Master and no Worker"},
		"a third replica": {"apiVersion: kubeflow.org/v1\nkind: PyTorchJob\nmetadata: {name: j}\nspec: {pytorchReplicaSpecs: {Chief: {}}}\n", "spec.pytorchReplicaSpecs.Chief: a PyTorchJob has Master and Worker replicas only"},
		"two masters":     {"apiVersion: kubeflow.org/v1\nkind: PyTorchJob\nmetadata: {name: j}\nspec: {pytorchReplicaSpecs: {Master: {replicas: 2, template: {spec: {containers: [{name: pytorch, image: x}]}}}}}\n", "spec.pytorchReplicaSpecs.Master.replicas: 2; a PyTorchJob has one Master"},
		"no container":    {"apiVersion: kubeflow.org/v1\nkind: PyTorchJob\nmetadata: {name: j}\nspec: {pytorchReplicaSpecs: {Master: {template: {spec: {}}}}}\n", "spec.pytorchReplicaSpecs.Master.template.spec.containers: no container to run"},
		"nothing":         {"# only a comment\n", "no documents to convert"},
		"not YAML":        {"apiVersion: [\n", "document 1"},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := Convert([]byte(tc.doc), Options{})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %v, want one containing %q", err, tc.want)
			}
		})
	}
}

func TestStripTorchrunFlags(t *testing.T) {
	for name, tc := range map[string]struct {
		command, args         []string
		wantCommand, wantArgs []string
		wantNproc             string
		wantRemoved           []string
	}{
		"flags in args, script's own flags kept": {
			command: []string{"torchrun"}, args: []string{"--nnodes=2", "--nproc_per_node", "4", "--max_restarts=3", "train.py", "--nnodes", "7"},
			wantCommand: []string{"torchrun"}, wantArgs: []string{"--max_restarts=3", "train.py", "--nnodes", "7"},
			wantNproc: "4", wantRemoved: []string{"--nnodes=2", "--nproc_per_node 4"},
		},
		"python -m, dashes": {
			command:     []string{"python", "-m", "torch.distributed.run", "--master-addr=h", "--rdzv-backend", "c10d", "--standalone", "x.py"},
			wantCommand: []string{"python", "-m", "torch.distributed.run", "x.py"},
			wantRemoved: []string{"--master-addr=h", "--rdzv-backend c10d", "--standalone"},
		},
		"no launcher": {
			command: []string{"python", "train.py", "--nnodes=2"}, wantCommand: []string{"python", "train.py", "--nnodes=2"},
		},
	} {
		t.Run(name, func(t *testing.T) {
			gotCommand, gotArgs, l := stripTorchrunFlags(tc.command, tc.args)
			if diff := cmp.Diff([]any{tc.wantCommand, tc.wantArgs, tc.wantNproc, tc.wantRemoved}, []any{gotCommand, gotArgs, l.nprocPerNode, l.removed}); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

// catalogJobs answers RuntimeJobs from Kiln's runtime catalog, as the API server does from
// its cluster.
func catalogJobs(t *testing.T) func(string) ([]string, bool) {
	t.Helper()
	catalog, err := runtimes.ClusterTrainingRuntimes()
	if err != nil {
		t.Fatal(err)
	}
	return func(name string) ([]string, bool) {
		for _, rt := range catalog {
			if rt.Name == name {
				var jobs []string
				for _, j := range rt.Spec.Template.Spec.ReplicatedJobs {
					jobs = append(jobs, j.Name)
				}
				return jobs, true
			}
		}
		return nil, false
	}
}

// Several documents convert in one call, in order; the options' namespace and runtime win
// over the sources'.
func TestConvertManyWithOptions(t *testing.T) {
	var all []byte
	inputs, _ := filepath.Glob("testdata/*.yaml")
	for _, in := range inputs {
		data, err := os.ReadFile(in)
		if err != nil {
			t.Fatal(err)
		}
		all = append(append(all, data...), []byte("\n---\n")...)
	}
	res, err := Convert(all, Options{Namespace: "team-b", Runtime: "torch-distributed-spot"})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Objects) != len(inputs) {
		t.Fatalf("%d objects from %d documents", len(res.Objects), len(inputs))
	}
	for i, o := range res.Objects {
		if o.GetNamespace() != "team-b" {
			t.Errorf("object %d in namespace %q", i, o.GetNamespace())
		}
		data, err := YAML(o)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(data), "name: torch-distributed-spot") {
			t.Errorf("object %d (%s) not on the runtime asked for:\n%s", i, o.GetName(), data)
		}
	}
	for _, w := range res.Warnings {
		if w.Document < 0 || w.Document >= len(inputs) {
			t.Errorf("warning %v names document %d", w, w.Document)
		}
	}
}
