package render

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"

	trainer "github.com/kiln-ml/kiln/api/trainer/v1alpha1"
	"github.com/kiln-ml/kiln/runtimes"
)

func catalogRuntime(t *testing.T, name string) *trainer.TrainingRuntimeSpec {
	t.Helper()
	rt, err := runtimes.ClusterTrainingRuntime(name)
	if err != nil {
		t.Fatal(err)
	}
	return &rt.Spec
}

func trainJob(tr *trainer.Trainer) *trainer.TrainJob {
	return &trainer.TrainJob{
		ObjectMeta: metav1.ObjectMeta{Name: "job", Namespace: "ns", UID: "uid-1"},
		Spec:       trainer.TrainJobSpec{RuntimeRef: trainer.RuntimeRef{Name: "rt"}, Trainer: tr},
	}
}

func replicated(t *testing.T, js *jobsetv1alpha2.JobSet, name string) *jobsetv1alpha2.ReplicatedJob {
	t.Helper()
	for i := range js.Spec.ReplicatedJobs {
		if js.Spec.ReplicatedJobs[i].Name == name {
			return &js.Spec.ReplicatedJobs[i]
		}
	}
	t.Fatalf("JobSet has no replicated job %s", name)
	return nil
}

func container(t *testing.T, rj *jobsetv1alpha2.ReplicatedJob, name string) corev1.Container {
	t.Helper()
	for _, c := range rj.Template.Spec.Template.Spec.Containers {
		if c.Name == name {
			return c
		}
	}
	t.Fatalf("replicated job %s has no container %s", rj.Name, name)
	return corev1.Container{}
}

var rank = func(name string) corev1.EnvVar { return completionIndex(name) }

func TestRenderTorch(t *testing.T) {
	gpus := corev1.ResourceRequirements{Limits: corev1.ResourceList{"nvidia.com/gpu": resource.MustParse("4")}}
	cpus := corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("3")}}
	cases := map[string]struct {
		trainer       *trainer.Trainer
		wantCount     int32
		wantEnv       []corev1.EnvVar
		wantResources corev1.ResourceRequirements
	}{
		"seed manifest": {
			trainer:   &trainer.Trainer{Image: ptr.To("docker.io/my-training-image:latest"), Command: []string{"torchrun", "train.py"}},
			wantCount: 1,
			wantEnv: []corev1.EnvVar{
				value("PET_NNODES", "1"), value("PET_NPROC_PER_NODE", "1"), rank("PET_NODE_RANK"),
				value("PET_MASTER_ADDR", "job-node-0-0.job"), value("PET_MASTER_PORT", "29500"),
			},
		},
		"multi-node on GPUs": {
			trainer:       &trainer.Trainer{NumNodes: ptr.To[int32](4), ResourcesPerNode: &gpus, Env: []corev1.EnvVar{value("LR", "0.1")}},
			wantCount:     4,
			wantResources: gpus,
			wantEnv: []corev1.EnvVar{
				value("LR", "0.1"), value("PET_NNODES", "4"), value("PET_NPROC_PER_NODE", "auto"), rank("PET_NODE_RANK"),
				value("PET_MASTER_ADDR", "job-node-0-0.job"), value("PET_MASTER_PORT", "29500"),
			},
		},
		"procs from CPUs": {
			trainer:       &trainer.Trainer{NumNodes: ptr.To[int32](2), ResourcesPerNode: &cpus},
			wantCount:     2,
			wantResources: cpus,
			wantEnv: []corev1.EnvVar{
				value("PET_NNODES", "2"), value("PET_NPROC_PER_NODE", "3"), rank("PET_NODE_RANK"),
				value("PET_MASTER_ADDR", "job-node-0-0.job"), value("PET_MASTER_PORT", "29500"),
			},
		},
		"explicit procs": {
			trainer:   &trainer.Trainer{NumProcPerNode: ptr.To[int32](8)},
			wantCount: 1,
			wantEnv: []corev1.EnvVar{
				value("PET_NNODES", "1"), value("PET_NPROC_PER_NODE", "8"), rank("PET_NODE_RANK"),
				value("PET_MASTER_ADDR", "job-node-0-0.job"), value("PET_MASTER_PORT", "29500"),
			},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			tj := trainJob(tc.trainer)
			res, err := Render(tj, catalogRuntime(t, "torch-distributed"))
			if err != nil {
				t.Fatal(err)
			}
			node := replicated(t, res.JobSet, "node")
			if diff := cmp.Diff([]int32{tc.wantCount, tc.wantCount}, []int32{*node.Template.Spec.Parallelism, *node.Template.Spec.Completions}); diff != "" {
				t.Errorf("parallelism/completions (-want +got):\n%s", diff)
			}
			c := container(t, node, "node")
			if diff := cmp.Diff(tc.wantEnv, c.Env); diff != "" {
				t.Errorf("env (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.wantResources, c.Resources); diff != "" {
				t.Errorf("resources (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff([]corev1.ContainerPort{{ContainerPort: 29500}}, c.Ports); diff != "" {
				t.Errorf("ports (-want +got):\n%s", diff)
			}
			if tc.trainer.Image != nil && c.Image != *tc.trainer.Image {
				t.Errorf("image = %s, want %s", c.Image, *tc.trainer.Image)
			}
			if diff := cmp.Diff(tc.trainer.Command, c.Command); diff != "" {
				t.Errorf("command (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff([]metav1.OwnerReference{OwnerReference(tj)}, res.JobSet.OwnerReferences); diff != "" {
				t.Errorf("owner (-want +got):\n%s", diff)
			}
			if res.HostfileConfigMap != nil || res.NeedsSSHSecret {
				t.Error("torch must not render MPI objects")
			}
		})
	}
}

func TestRenderJAXAndXGBoost(t *testing.T) {
	gpus := corev1.ResourceRequirements{Requests: corev1.ResourceList{"nvidia.com/gpu": resource.MustParse("2")}}
	cases := map[string]struct {
		runtime string
		want    []corev1.EnvVar
	}{
		"jax-distributed": {runtime: "jax-distributed", want: []corev1.EnvVar{
			value("JAX_NUM_PROCESSES", "3"), rank("JAX_PROCESS_ID"), value("JAX_COORDINATOR_ADDRESS", "job-node-0-0.job:29500"), value("A", "b"),
		}},
		"xgboost-distributed": {runtime: "xgboost-distributed", want: []corev1.EnvVar{
			value("DMLC_TRACKER_URI", "job-node-0-0.job"), value("DMLC_TRACKER_PORT", "29500"), rank("DMLC_TASK_ID"), value("DMLC_NUM_WORKER", "6"), value("A", "b"),
		}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			res, err := Render(trainJob(&trainer.Trainer{NumNodes: ptr.To[int32](3), ResourcesPerNode: &gpus, Env: []corev1.EnvVar{value("A", "b")}}), catalogRuntime(t, tc.runtime))
			if err != nil {
				t.Fatal(err)
			}
			node := replicated(t, res.JobSet, "node")
			if got := *node.Template.Spec.Parallelism; got != 3 {
				t.Errorf("parallelism = %d, want 3", got)
			}
			if diff := cmp.Diff(tc.want, container(t, node, "node").Env); diff != "" {
				t.Errorf("env (-want +got):\n%s", diff)
			}
		})
	}
}

func TestRenderMPI(t *testing.T) {
	tj := trainJob(&trainer.Trainer{NumNodes: ptr.To[int32](3), Command: []string{"mpirun", "python", "train.py"}})
	res, err := Render(tj, catalogRuntime(t, "deepspeed-distributed"))
	if err != nil {
		t.Fatal(err)
	}
	node, launcher := replicated(t, res.JobSet, "node"), replicated(t, res.JobSet, "launcher")
	if got := []int32{*node.Template.Spec.Parallelism, *launcher.Template.Spec.Parallelism}; !cmp.Equal(got, []int32{2, 1}) {
		t.Errorf("node/launcher parallelism = %v, want [2 1] (the launcher is a node too)", got)
	}
	lc := container(t, launcher, "node")
	wantEnv := []corev1.EnvVar{
		value("OMPI_MCA_orte_default_hostfile", "/etc/mpi/hostfile"),
		value("OMPI_MCA_orte_keep_fqdn_hostnames", "true"),
		value("OMPI_MCA_orte_set_default_slots", "1"),
		value("OMPI_MCA_plm_rsh_args", "-o ConnectionAttempts=10"),
	}
	if diff := cmp.Diff(wantEnv, lc.Env); diff != "" {
		t.Errorf("launcher env (-want +got):\n%s", diff)
	}
	wantMounts := []corev1.VolumeMount{{Name: "mpi-ssh-auth", MountPath: "/home/mpiuser/.ssh"}, {Name: "mpi-hostfile", MountPath: "/etc/mpi"}}
	if diff := cmp.Diff(wantMounts, lc.VolumeMounts); diff != "" {
		t.Errorf("launcher mounts (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(tj.Spec.Trainer.Command, lc.Command); diff != "" {
		t.Errorf("launcher command (-want +got):\n%s", diff)
	}
	if got := container(t, node, "node").Command; !cmp.Equal(got, []string{"/usr/sbin/sshd"}) {
		t.Errorf("node command = %v, want the runtime's sshd", got)
	}
	wantHosts := "job-node-0-0.job slots=1\njob-node-0-1.job slots=1\njob-launcher-0-0.job slots=1\n"
	if diff := cmp.Diff(wantHosts, res.HostfileConfigMap.Data["hostfile"]); diff != "" {
		t.Errorf("hostfile (-want +got):\n%s", diff)
	}
	if !res.NeedsSSHSecret {
		t.Error("MPI needs its SSH secret")
	}
	secret, err := NewSSHSecret(tj)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(string(secret.Data["ssh-publickey"]), "ecdsa-sha2-nistp521 ") || secret.Type != corev1.SecretTypeSSHAuth {
		t.Errorf("unexpected SSH secret: type %s, public key %q", secret.Type, secret.Data["ssh-publickey"])
	}
}

func TestRenderRuntimePatches(t *testing.T) {
	kueuePatch := func(selector map[string]string) trainer.RuntimePatch {
		return trainer.RuntimePatch{Manager: trainer.KueueManager, TrainingRuntimeSpec: &trainer.TrainingRuntimeSpecPatch{Template: &trainer.JobSetTemplatePatch{
			Metadata: &metav1.ObjectMeta{Labels: map[string]string{"kueue.x-k8s.io/queue-name": "default"}},
			Spec: &trainer.JobSetSpecPatch{ReplicatedJobs: []trainer.ReplicatedJobPatch{{Name: "node", Template: &trainer.JobTemplatePatch{Spec: &trainer.JobSpecPatch{
				Template: &trainer.PodTemplatePatch{Spec: &trainer.PodSpecPatch{
					NodeSelector: selector,
					Tolerations:  []corev1.Toleration{{Key: "spot", Operator: corev1.TolerationOpExists}},
					Containers:   []trainer.ContainerPatch{{Name: "node", Env: []corev1.EnvVar{value("FROM_PATCH", "1")}}},
				}},
			}}}}},
		}}}
	}
	cases := map[string]struct {
		patches      []trainer.RuntimePatch
		wantSelector map[string]string
		wantLabels   map[string]string
		wantPatchEnv bool
	}{
		"no patch": {},
		"kueue admission": {
			patches:      []trainer.RuntimePatch{kueuePatch(map[string]string{"pool": "gpu"})},
			wantSelector: map[string]string{"pool": "gpu"},
			wantLabels:   map[string]string{"kueue.x-k8s.io/queue-name": "default"},
			wantPatchEnv: true,
		},
		"later patch wins": {
			patches: []trainer.RuntimePatch{
				kueuePatch(map[string]string{"pool": "gpu"}),
				{Manager: "example.com/platform", TrainingRuntimeSpec: &trainer.TrainingRuntimeSpecPatch{Template: &trainer.JobSetTemplatePatch{
					Spec: &trainer.JobSetSpecPatch{ReplicatedJobs: []trainer.ReplicatedJobPatch{{Name: "node", Template: &trainer.JobTemplatePatch{Spec: &trainer.JobSpecPatch{
						Template: &trainer.PodTemplatePatch{Spec: &trainer.PodSpecPatch{NodeSelector: map[string]string{"pool": "spot"}}},
					}}}}},
				}}},
			},
			wantSelector: map[string]string{"pool": "spot"},
			wantLabels:   map[string]string{"kueue.x-k8s.io/queue-name": "default"},
			wantPatchEnv: true,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			tj := trainJob(&trainer.Trainer{})
			tj.Spec.RuntimePatches = tc.patches
			tj.Spec.Suspend = ptr.To(true)
			res, err := Render(tj, catalogRuntime(t, "torch-distributed"))
			if err != nil {
				t.Fatal(err)
			}
			pod := replicated(t, res.JobSet, "node").Template.Spec.Template.Spec
			if diff := cmp.Diff(tc.wantSelector, pod.NodeSelector); diff != "" {
				t.Errorf("nodeSelector (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.wantLabels, res.JobSet.Labels); diff != "" {
				t.Errorf("JobSet labels (-want +got):\n%s", diff)
			}
			var hasEnv bool
			for _, e := range pod.Containers[0].Env {
				hasEnv = hasEnv || e.Name == "FROM_PATCH"
			}
			if hasEnv != tc.wantPatchEnv {
				t.Errorf("patch env present = %v, want %v", hasEnv, tc.wantPatchEnv)
			}
			if !ptr.Deref(res.JobSet.Spec.Suspend, false) {
				t.Error("a suspended TrainJob must render a suspended JobSet")
			}
		})
	}
}

func TestRenderInitializers(t *testing.T) {
	rt := catalogRuntime(t, "torch-distributed")
	initJob := func(name string) jobsetv1alpha2.ReplicatedJob {
		return jobsetv1alpha2.ReplicatedJob{Name: name, Replicas: 1, Template: batchTemplate(name)}
	}
	rt.Template.Spec.ReplicatedJobs = append([]jobsetv1alpha2.ReplicatedJob{initJob("dataset-initializer"), initJob("model-initializer")}, rt.Template.Spec.ReplicatedJobs...)
	tj := trainJob(&trainer.Trainer{})
	tj.Spec.Initializer = &trainer.Initializer{
		Dataset: &trainer.DatasetInitializer{StorageUri: ptr.To("hf://tatsu-lab/alpaca"), SecretRef: &corev1.LocalObjectReference{Name: "hf-token"}},
		Model:   &trainer.ModelInitializer{StorageUri: ptr.To("hf://meta-llama/Llama-3.2-1B"), Env: []corev1.EnvVar{value("REVISION", "main")}},
	}
	res, err := Render(tj, rt)
	if err != nil {
		t.Fatal(err)
	}
	ds := container(t, replicated(t, res.JobSet, "dataset-initializer"), "dataset-initializer")
	if diff := cmp.Diff([]corev1.EnvVar{value("STORAGE_URI", "hf://tatsu-lab/alpaca")}, ds.Env); diff != "" {
		t.Errorf("dataset env (-want +got):\n%s", diff)
	}
	if len(ds.EnvFrom) != 1 || ds.EnvFrom[0].SecretRef.Name != "hf-token" {
		t.Errorf("dataset envFrom = %v, want the hf-token secret", ds.EnvFrom)
	}
	model := container(t, replicated(t, res.JobSet, "model-initializer"), "model-initializer")
	if diff := cmp.Diff([]corev1.EnvVar{value("STORAGE_URI", "hf://meta-llama/Llama-3.2-1B"), value("REVISION", "main")}, model.Env); diff != "" {
		t.Errorf("model env (-want +got):\n%s", diff)
	}
}

func batchTemplate(ancestor string) batchv1.JobTemplateSpec {
	tmpl := batchv1.JobTemplateSpec{}
	tmpl.Labels = map[string]string{trainer.LabelTrainJobAncestor: ancestor}
	tmpl.Spec.Template.Spec.Containers = []corev1.Container{{Name: ancestor, Image: "initializer:latest"}}
	return tmpl
}

// The spot runtime's restart policy and checkpoint volume reach the JobSet as written, and a
// job's own KILN_CHECKPOINT_INTERVAL replaces the runtime's in place, before the name it needs.
func TestRenderSpot(t *testing.T) {
	tj := trainJob(&trainer.Trainer{NumNodes: ptr.To[int32](4), Env: []corev1.EnvVar{value("KILN_CHECKPOINT_INTERVAL", "500")}})
	res, err := Render(tj, catalogRuntime(t, "torch-distributed-spot"))
	if err != nil {
		t.Fatal(err)
	}
	fp := res.JobSet.Spec.FailurePolicy
	if fp == nil || fp.MaxRestarts != 3 || fp.RestartStrategy != jobsetv1alpha2.BlockingRecreate {
		t.Fatalf("failurePolicy = %+v, want maxRestarts 3 with BlockingRecreate", fp)
	}
	var rules []string
	for _, r := range fp.Rules {
		rules = append(rules, r.Name+"="+string(r.Action))
	}
	if diff := cmp.Diff([]string{"Disruption=RestartJobSetAndIgnoreMaxRestarts", "NonRetriable=FailJobSet"}, rules); diff != "" {
		t.Errorf("rules (-want +got):\n%s", diff)
	}
	node := replicated(t, res.JobSet, "node")
	job := node.Template.Spec
	if ptr.Deref(job.BackoffLimit, -1) != 0 || job.PodFailurePolicy == nil || len(job.PodFailurePolicy.Rules) != 3 || job.Template.Spec.RestartPolicy != corev1.RestartPolicyNever {
		t.Errorf("job: backoffLimit %v, podFailurePolicy %+v, restartPolicy %q; want 0, 3 rules, Never", job.BackoffLimit, job.PodFailurePolicy, job.Template.Spec.RestartPolicy)
	}
	c := container(t, node, "node")
	var names []string
	for _, e := range c.Env {
		names = append(names, e.Name+"="+e.Value)
	}
	if diff := cmp.Diff([]string{
		"KILN_TRAINJOB_NAME=", "KILN_CHECKPOINT_DIR=/kiln/checkpoints", "KILN_CHECKPOINT_INTERVAL=500",
		"PET_NNODES=4", "PET_NPROC_PER_NODE=1", "PET_NODE_RANK=", "PET_MASTER_ADDR=job-node-0-0.job", "PET_MASTER_PORT=29500",
	}, names); diff != "" {
		t.Errorf("env (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]corev1.VolumeMount{{Name: "checkpoints", MountPath: "/kiln/checkpoints", SubPathExpr: "$(KILN_TRAINJOB_NAME)"}}, c.VolumeMounts); diff != "" {
		t.Errorf("volume mounts (-want +got):\n%s", diff)
	}
}
