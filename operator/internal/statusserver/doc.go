// Package statusserver is the operator's status server: the endpoint to which a TrainJob's
// trainer reports its progress and metrics, with upstream Kubeflow Trainer's protocol
// (KEP-2779), so that the Kubeflow SDK, its Hugging Face callback and Kiln's kiln.progress
// all work unchanged.
//
//   - server.go: the HTTPS endpoint (POST <StatusPath>), its limits (64 KiB bodies, a
//     per-job request rate) and its answers, Kubernetes Status objects naming the reason.
//   - auth.go: who may post. The bearer token must be a projected ServiceAccount token with
//     the job's audience, bound to a pod of that job in its namespace; the Kubernetes API
//     judges it (TokenReview), and the verdict is cached briefly.
//   - validate.go: the body, checked against the CRD's limits before anything is written.
//   - writer.go: reports are coalesced per job and written through the server's own client
//     and rate limit: the latest status at most once per interval per job, and the history.
//   - history.go: the bounded, downsampled history (a kiln.dev TrainJobMetrics per job).
package statusserver
