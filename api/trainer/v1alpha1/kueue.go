package v1alpha1

// Kueue's labels, which Kiln reads and sets on TrainJobs. Kueue's objects are read with
// Kueue's own types, through package github.com/kiln-ml/kiln/api/kueue.
const (
	// KueueQueueNameLabel names the LocalQueue a job waits in.
	KueueQueueNameLabel = "kueue.x-k8s.io/queue-name"
	// KueuePriorityClassLabel names the job's WorkloadPriorityClass.
	KueuePriorityClassLabel = "kueue.x-k8s.io/priority-class"
	// KueueJobUIDLabel marks a Workload with the UID of the job it stands for.
	KueueJobUIDLabel = "kueue.x-k8s.io/job-uid"
	// KueueMultiKueueOriginLabel marks the copy of a job that a MultiKueue manager created on
	// a worker cluster (its value names the manager).
	KueueMultiKueueOriginLabel = "kueue.x-k8s.io/multikueue-origin"
)
