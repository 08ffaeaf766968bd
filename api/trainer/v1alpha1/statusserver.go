package v1alpha1

import "fmt"

// The trainer status protocol (upstream's KEP-2779): a trainer POSTs an
// UpdateTrainJobStatusRequest to the status server at StatusPath, with a projected
// ServiceAccount token whose audience is TokenAudience. It finds the server through three
// environment variables, whose values are a URL and two file paths.
const (
	EnvStatusServerURL    = "KUBEFLOW_TRAINER_SERVER_URL"
	EnvStatusServerCACert = "KUBEFLOW_TRAINER_SERVER_CA_CERT"
	EnvStatusServerToken  = "KUBEFLOW_TRAINER_SERVER_TOKEN"

	// StatusServerMountPath is where the token and the CA certificate are mounted.
	StatusServerMountPath = "/var/run/secrets/kubeflow/trainer"
	// StatusServerVolumeName is the projected volume holding them.
	StatusServerVolumeName = "kubeflow-trainer-token"
	StatusServerTokenFile  = "token"
	StatusServerCAFile     = "ca.crt"
	// StatusServerTokenExpirySeconds is the projected token's lifetime; the kubelet
	// replaces the file before it expires.
	StatusServerTokenExpirySeconds = 3600
)

// TokenAudience is the audience of the tokens that may update the status of one TrainJob.
func TokenAudience(namespace, name string) string {
	return fmt.Sprintf("trainer.kubeflow.org/v1alpha1/namespaces/%s/trainjobs/%s/status", namespace, name)
}

// StatusPath is the status server's path for one TrainJob.
func StatusPath(namespace, name string) string {
	return fmt.Sprintf("/apis/trainer.kubeflow.org/v1alpha1/namespaces/%s/trainjobs/%s/status", namespace, name)
}
