package v1alpha1

import "k8s.io/apimachinery/pkg/runtime/schema"

// KueueGroupVersion is the Kueue API Kiln reads (Workloads, LocalQueues, ClusterQueues), as
// unstructured objects: Kueue's own module requires k8s.io/kubernetes, which no library
// should import.
var KueueGroupVersion = schema.GroupVersion{Group: "kueue.x-k8s.io", Version: "v1beta2"}

// Kueue's labels, which Kiln reads and sets on TrainJobs (Kueue's own API is not imported:
// its module requires k8s.io/kubernetes).
const (
	// KueueQueueNameLabel names the LocalQueue a job waits in.
	KueueQueueNameLabel = "kueue.x-k8s.io/queue-name"
	// KueuePriorityClassLabel names the job's WorkloadPriorityClass.
	KueuePriorityClassLabel = "kueue.x-k8s.io/priority-class"
	// KueueJobUIDLabel marks a Workload with the UID of the job it stands for.
	KueueJobUIDLabel = "kueue.x-k8s.io/job-uid"
)
