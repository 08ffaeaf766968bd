package view

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/testing/protocmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	kilnv1 "github.com/kiln-ml/kiln/api/gen/kiln/v1"
)

func pod(name, rj, jobIndex, index string, created int, phase corev1.PodPhase) corev1.Pod {
	return corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name: name, CreationTimestamp: metav1.NewTime(time.Unix(int64(created), 0)),
			Labels: map[string]string{
				"jobset.sigs.k8s.io/replicatedjob-name": rj, "jobset.sigs.k8s.io/job-index": jobIndex,
				"batch.kubernetes.io/job-completion-index": index,
			},
		},
		Spec: corev1.PodSpec{NodeName: "kwok-gpu-0", Containers: []corev1.Container{{Name: rj, Resources: corev1.ResourceRequirements{
			Limits: corev1.ResourceList{"nvidia.com/gpu": resource.MustParse("8"), corev1.ResourceCPU: resource.MustParse("4")},
		}}}},
		Status: corev1.PodStatus{Phase: phase},
	}
}

func TestSteps(t *testing.T) {
	failed := pod("j-node-0-1-old", "node", "0", "1", 1, corev1.PodFailed)
	failed.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "node", State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 42, Reason: "Error"}}}}
	retried := pod("j-node-0-1-new", "node", "0", "1", 5, corev1.PodRunning)
	retried.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "node", RestartCount: 2}}
	pods := []corev1.Pod{
		pod("j-node-0-0-a", "node", "0", "0", 2, corev1.PodRunning),
		failed, retried,
		pod("j-dataset-initializer-0-0-b", "dataset-initializer", "0", "0", 0, corev1.PodSucceeded),
		{ObjectMeta: metav1.ObjectMeta{Name: "stray"}},
	}
	gpus := []*kilnv1.Device{{Resource: "nvidia.com/gpu", Count: 8}}
	want := []*kilnv1.Step{
		{Name: "dataset-initializer-0", KubeflowName: "dataset-initializer", ReplicatedJob: "dataset-initializer", Pod: "j-dataset-initializer-0-0-b", Phase: "Succeeded", Node: "kwok-gpu-0", Devices: gpus},
		{Name: "node-0", KubeflowName: "node-0", ReplicatedJob: "node", Pod: "j-node-0-0-a", Phase: "Running", Node: "kwok-gpu-0", Devices: gpus},
		{Name: "node-1", KubeflowName: "node-1", ReplicatedJob: "node", Index: 1, Pod: "j-node-0-1-new", Phase: "Running", Node: "kwok-gpu-0", Devices: gpus, Restarts: 3},
	}
	if diff := cmp.Diff(want, Steps(pods), protocmp.Transform()); diff != "" {
		t.Errorf("Steps() mismatch (-want +got):\n%s", diff)
	}
	if got := Steps([]corev1.Pod{failed}); got[0].GetExitCode() != 42 || got[0].GetReason() != "Error" {
		t.Errorf("Steps() of a failed pod = exit %v reason %q, want 42 Error", ptr.Deref(got[0].ExitCode, -1), got[0].GetReason())
	}
}

func TestStepNamesWithSeveralJobs(t *testing.T) {
	got := Steps([]corev1.Pod{pod("a", "worker", "0", "0", 1, corev1.PodRunning), pod("b", "worker", "1", "0", 1, corev1.PodRunning)})
	var names []string
	for _, s := range got {
		names = append(names, s.GetName())
	}
	if diff := cmp.Diff([]string{"worker-0-0", "worker-1-0"}, names); diff != "" {
		t.Errorf("step names (-want +got):\n%s", diff)
	}
}

// The Kubeflow SDK names an MPI job's launcher node-0 and its nodes from node-1.
func TestKubeflowStepNames(t *testing.T) {
	names := func(pods ...corev1.Pod) (out [][2]string) {
		for _, s := range Steps(pods) {
			out = append(out, [2]string{s.GetName(), s.GetKubeflowName()})
		}
		return out
	}
	mpi := names(pod("l", "launcher", "0", "0", 1, corev1.PodRunning), pod("a", "node", "0", "0", 1, corev1.PodRunning), pod("b", "node", "0", "1", 1, corev1.PodRunning),
		pod("m", "model-initializer", "0", "0", 0, corev1.PodSucceeded))
	if diff := cmp.Diff([][2]string{{"model-initializer-0", "model-initializer"}, {"launcher-0", "node-0"}, {"node-0", "node-1"}, {"node-1", "node-2"}}, mpi); diff != "" {
		t.Errorf("an MPI job's steps (-want +got):\n%s", diff)
	}
	several := names(pod("a", "worker", "0", "0", 1, corev1.PodRunning), pod("b", "worker", "1", "0", 1, corev1.PodRunning))
	if diff := cmp.Diff([][2]string{{"worker-0-0", "worker-0-0"}, {"worker-1-0", "worker-1-0"}}, several); diff != "" {
		t.Errorf("several Jobs keep Kiln's names (-want +got):\n%s", diff)
	}
}
