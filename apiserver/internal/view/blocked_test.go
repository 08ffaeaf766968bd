package view

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func pendingPod(name string, conds []corev1.PodCondition, waiting *corev1.ContainerStateWaiting) corev1.Pod {
	p := corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "team"}, Status: corev1.PodStatus{Phase: corev1.PodPending, Conditions: conds}}
	if waiting != nil {
		p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "node", Image: "ghcr.io/me/train:v3", State: corev1.ContainerState{Waiting: waiting}}}
	}
	return p
}

func unschedulable(msg string) []corev1.PodCondition {
	return []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: corev1.PodReasonUnschedulable, Message: msg}}
}

func TestBlocked(t *testing.T) {
	cases := map[string]struct {
		pods       []corev1.Pod
		wantReason string
		wantMsg    string
	}{
		"a claim that does not exist": {
			pods:       []corev1.Pod{pendingPod("job-node-0-0-abcde", unschedulable(`0/3 nodes are available: persistentvolumeclaim "kiln-checkpoints" not found. preemption: 0/3 nodes are available: 3 Preemption is not helpful for scheduling.`), nil)},
			wantReason: ReasonWaitingForVolume,
			wantMsg:    "waiting for PersistentVolumeClaim kiln-checkpoints, which does not exist in namespace team: create it (pod job-node-0-0-abcde cannot be scheduled)",
		},
		"no node fits": {
			pods:       []corev1.Pod{pendingPod("p", unschedulable("0/3 nodes are available: 3 Insufficient nvidia.com/gpu."), nil)},
			wantReason: ReasonWaitingForNode,
			wantMsg:    "waiting for a node that fits pod p: 0/3 nodes are available: 3 Insufficient nvidia.com/gpu.",
		},
		"an image that cannot be pulled": {
			pods:       []corev1.Pod{pendingPod("p", nil, &corev1.ContainerStateWaiting{Reason: "ImagePullBackOff", Message: `Back-off pulling image "ghcr.io/me/train:v3"`})},
			wantReason: ReasonWaitingForImage,
			wantMsg:    `waiting for image ghcr.io/me/train:v3 of pod p, which cannot be pulled (ImagePullBackOff): Back-off pulling image "ghcr.io/me/train:v3"`,
		},
		"a Secret that does not exist": {
			pods:       []corev1.Pod{pendingPod("p", nil, &corev1.ContainerStateWaiting{Reason: "CreateContainerConfigError", Message: `secret "hf-token" not found`})},
			wantReason: ReasonWaitingForSecret,
			wantMsg:    "waiting for Secret hf-token, which does not exist in namespace team: create it (pod p)",
		},
		"a ConfigMap that does not exist": {
			pods:       []corev1.Pod{pendingPod("p", nil, &corev1.ContainerStateWaiting{Reason: "CreateContainerConfigError", Message: `configmap "cfg" not found`})},
			wantReason: ReasonWaitingForConfigMap,
			wantMsg:    "waiting for ConfigMap cfg, which does not exist in namespace team: create it (pod p)",
		},
		"merely starting: nothing": {
			pods: []corev1.Pod{pendingPod("p", nil, &corev1.ContainerStateWaiting{Reason: "ContainerCreating"})},
		},
		"running: nothing": {
			pods: []corev1.Pod{{ObjectMeta: metav1.ObjectMeta{Name: "p"}, Status: corev1.PodStatus{Phase: corev1.PodRunning}}},
		},
		"the first blocked pod by name speaks": {
			pods: []corev1.Pod{
				pendingPod("b", unschedulable("0/3 nodes are available: 3 Insufficient cpu."), nil),
				pendingPod("a", nil, &corev1.ContainerStateWaiting{Reason: "ErrImagePull", Message: "not found"}),
			},
			wantReason: ReasonWaitingForImage,
			wantMsg:    "waiting for image ghcr.io/me/train:v3 of pod a, which cannot be pulled (ErrImagePull): not found",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			reason, msg := Blocked(tc.pods)
			if reason != tc.wantReason || msg != tc.wantMsg {
				t.Errorf("Blocked = %q, %q; want %q, %q", reason, msg, tc.wantReason, tc.wantMsg)
			}
		})
	}
}
