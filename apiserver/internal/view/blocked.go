package view

import (
	"fmt"
	"regexp"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// Reasons of a started job none of whose pods can run yet, and will not until something
// outside the job changes: each names what its pods wait for. Clients show such a job as
// starting, never plainly running.
const (
	ReasonWaitingForVolume    = "WaitingForVolume"
	ReasonWaitingForImage     = "WaitingForImage"
	ReasonWaitingForSecret    = "WaitingForSecret"
	ReasonWaitingForConfigMap = "WaitingForConfigMap"
	ReasonWaitingForNode      = "WaitingForNode"
)

// What the scheduler and the kubelet say of a missing object.
var (
	missingClaim   = regexp.MustCompile(`persistentvolumeclaim "([^"]+)" not found`)
	unboundClaims  = regexp.MustCompile(`unbound immediate PersistentVolumeClaims`)
	missingSecret  = regexp.MustCompile(`secret "([^"]+)" not found`)
	missingConfig  = regexp.MustCompile(`configmap "([^"]+)" not found`)
	imageFailures  = []string{"ErrImagePull", "ImagePullBackOff", "InvalidImageName", "ErrImageNeverPull"}
	configFailures = []string{"CreateContainerConfigError", "CreateContainerError"}
)

// Blocked says what keeps a started job's pods from running, as a reason and a message
// ("waiting for PersistentVolumeClaim kiln-checkpoints ..."), when one of its pods is pending
// on something that does not come by itself: a claim, an image, a Secret or ConfigMap, a node
// that fits. Empty when none is (pods merely being scheduled or starting).
func Blocked(pods []corev1.Pod) (string, string) {
	// The pods in the order their steps are shown, so that the first blocked one speaks.
	ordered := slices.Clone(pods)
	slices.SortFunc(ordered, func(a, b corev1.Pod) int { return strings.Compare(a.Name, b.Name) })
	for i := range ordered {
		if reason, msg := blockedPod(&ordered[i]); reason != "" {
			return reason, msg
		}
	}
	return "", ""
}

func blockedPod(pod *corev1.Pod) (string, string) {
	if pod.Status.Phase != corev1.PodPending || pod.DeletionTimestamp != nil {
		return "", ""
	}
	for _, c := range pod.Status.Conditions {
		if c.Type != corev1.PodScheduled || c.Status != corev1.ConditionFalse || c.Reason != corev1.PodReasonUnschedulable {
			continue
		}
		if m := missingClaim.FindStringSubmatch(c.Message); m != nil {
			return ReasonWaitingForVolume, fmt.Sprintf("waiting for PersistentVolumeClaim %s, which does not exist in namespace %s: create it (pod %s cannot be scheduled)", m[1], pod.Namespace, pod.Name)
		}
		if unboundClaims.MatchString(c.Message) {
			return ReasonWaitingForVolume, fmt.Sprintf("waiting for its PersistentVolumeClaims to be bound to volumes (pod %s: %s)", pod.Name, c.Message)
		}
		return ReasonWaitingForNode, fmt.Sprintf("waiting for a node that fits pod %s: %s", pod.Name, c.Message)
	}
	for _, cs := range slices.Concat(pod.Status.InitContainerStatuses, pod.Status.ContainerStatuses) {
		w := cs.State.Waiting
		if w == nil {
			continue
		}
		switch {
		case slices.Contains(imageFailures, w.Reason):
			return ReasonWaitingForImage, fmt.Sprintf("waiting for image %s of pod %s, which cannot be pulled (%s): %s", cs.Image, pod.Name, w.Reason, w.Message)
		case slices.Contains(configFailures, w.Reason):
			if m := missingSecret.FindStringSubmatch(w.Message); m != nil {
				return ReasonWaitingForSecret, fmt.Sprintf("waiting for Secret %s, which does not exist in namespace %s: create it (pod %s)", m[1], pod.Namespace, pod.Name)
			}
			if m := missingConfig.FindStringSubmatch(w.Message); m != nil {
				return ReasonWaitingForConfigMap, fmt.Sprintf("waiting for ConfigMap %s, which does not exist in namespace %s: create it (pod %s)", m[1], pod.Namespace, pod.Name)
			}
		}
	}
	return "", ""
}
