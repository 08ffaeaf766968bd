package render

import (
	corev1 "k8s.io/api/core/v1"
)

// upsertEnv replaces variables by name in place and appends new ones, in order.
func upsertEnv(dst *[]corev1.EnvVar, vars ...corev1.EnvVar) {
	for _, v := range vars {
		replaced := false
		for i := range *dst {
			if (*dst)[i].Name == v.Name {
				(*dst)[i] = v
				replaced = true
				break
			}
		}
		if !replaced {
			*dst = append(*dst, v)
		}
	}
}

func upsertPort(dst *[]corev1.ContainerPort, p corev1.ContainerPort) {
	for i := range *dst {
		if (*dst)[i].ContainerPort == p.ContainerPort || (p.Name != "" && (*dst)[i].Name == p.Name) {
			(*dst)[i] = p
			return
		}
	}
	*dst = append(*dst, p)
}

func upsertVolume(dst *[]corev1.Volume, v corev1.Volume) {
	for i := range *dst {
		if (*dst)[i].Name == v.Name {
			(*dst)[i] = v
			return
		}
	}
	*dst = append(*dst, v)
}

func upsertVolumeMount(dst *[]corev1.VolumeMount, m corev1.VolumeMount) {
	for i := range *dst {
		if (*dst)[i].MountPath == m.MountPath {
			(*dst)[i] = m
			return
		}
	}
	*dst = append(*dst, m)
}

func value(name, v string) corev1.EnvVar { return corev1.EnvVar{Name: name, Value: v} }

// completionIndex is a pod's index within its Job, which is its node rank.
func completionIndex(name string) corev1.EnvVar {
	return corev1.EnvVar{Name: name, ValueFrom: &corev1.EnvVarSource{
		FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.annotations['batch.kubernetes.io/job-completion-index']"},
	}}
}
