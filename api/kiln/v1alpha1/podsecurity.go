package v1alpha1

const (
	// AnnotationPodSecurity, PodSecurityPrivileged on a ClusterTrainingRuntime (an
	// annotation) or a namespace (a label), lets TrainJobs on that runtime or in that
	// namespace run pods beyond Pod Security's baseline level: privileged containers, host
	// namespaces, host paths and ports, added capabilities. Without it Kiln's webhook refuses
	// such a TrainJob, naming what it asks for. Only an admin should set it.
	AnnotationPodSecurity = "kiln.dev/pod-security"
	// PodSecurityPrivileged is the value of AnnotationPodSecurity that allows it.
	PodSecurityPrivileged = "privileged"
)
