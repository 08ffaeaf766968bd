package render

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"

	kiln "github.com/kiln-ml/kiln/api/kiln/v1alpha1"
	trainer "github.com/kiln-ml/kiln/api/trainer/v1alpha1"
)

// StatusServer says where trainers report their progress (upstream's TrainJobStatus
// plugin, KEP-2779). BaseURL empty: nowhere, nothing is injected.
type StatusServer struct {
	// BaseURL is the status server's https://host:port as pods reach it.
	BaseURL string
}

// InjectStatusServer gives every container of the trainer's pods (and of an MPI launcher)
// the three variables of the protocol, and mounts a projected volume at
// StatusServerMountPath holding a ServiceAccount token whose audience is this TrainJob's
// status endpoint and the server's CA certificate, as upstream's plugin does. The CA comes
// from kiln.StatusServerCAConfigMap (optional: a pod never waits for it).
func InjectStatusServer(js *jobsetv1alpha2.JobSet, tj *trainer.TrainJob, s StatusServer) {
	if s.BaseURL == "" {
		return
	}
	env := []corev1.EnvVar{
		value(trainer.EnvStatusServerURL, s.BaseURL+trainer.StatusPath(tj.Namespace, tj.Name)),
		value(trainer.EnvStatusServerCACert, trainer.StatusServerMountPath+"/"+trainer.StatusServerCAFile),
		value(trainer.EnvStatusServerToken, trainer.StatusServerMountPath+"/"+trainer.StatusServerTokenFile),
	}
	mount := corev1.VolumeMount{Name: trainer.StatusServerVolumeName, MountPath: trainer.StatusServerMountPath, ReadOnly: true}
	volume := corev1.Volume{Name: trainer.StatusServerVolumeName, VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{
		Sources: []corev1.VolumeProjection{
			{ServiceAccountToken: &corev1.ServiceAccountTokenProjection{
				Audience:          trainer.TokenAudience(tj.Namespace, tj.Name),
				ExpirationSeconds: ptr.To[int64](trainer.StatusServerTokenExpirySeconds),
				Path:              trainer.StatusServerTokenFile,
			}},
			{ConfigMap: &corev1.ConfigMapProjection{
				LocalObjectReference: corev1.LocalObjectReference{Name: kiln.StatusServerCAConfigMap},
				Items:                []corev1.KeyToPath{{Key: trainer.StatusServerCAFile, Path: trainer.StatusServerCAFile}},
				Optional:             ptr.To(true),
			}},
		},
	}}}
	for i := range js.Spec.ReplicatedJobs {
		rj := &js.Spec.ReplicatedJobs[i]
		if rj.Template.Labels[trainer.LabelTrainJobAncestor] != trainer.AncestorTrainer && rj.Name != trainer.LauncherName {
			continue
		}
		pod := &rj.Template.Spec.Template.Spec
		for _, cs := range [][]corev1.Container{pod.InitContainers, pod.Containers} {
			for j := range cs {
				upsertEnv(&cs[j].Env, env...)
				upsertVolumeMount(&cs[j].VolumeMounts, mount)
			}
		}
		upsertVolume(&pod.Volumes, volume)
	}
}
