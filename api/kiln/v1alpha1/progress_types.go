package v1alpha1

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Annotations of the progress a trainer reports (status.trainerStatus, upstream's
// KEP-2779 protocol) that Kiln acts on.
const (
	// AnnotationProgressDeadline is how long a running TrainJob may go without reporting
	// progress (a Go duration, e.g. "15m"). Set it on the TrainJob, or on its runtime, whose
	// value the TrainJob takes when it is created. Once a job has reported, a silence that
	// long (never counting time queued or suspended) restarts all its pods once (restart
	// reason ProgressStalled), and a second one fails it (ProgressDeadlineExceeded). A job
	// that never reports is never judged.
	AnnotationProgressDeadline = "kiln.dev/progress-deadline"
)

// StatusServerCAConfigMap is the ConfigMap, one per namespace and owned by none of its
// jobs (like kube-root-ca.crt), holding the CA certificate of the operator's status server
// (key ca.crt) that trainer pods mount.
const StatusServerCAConfigMap = "kiln-status-server-ca"

// Names of the metrics Kiln's helper (the Python SDK's kiln.progress) reports beside the
// trainer's own, which Kiln's surfaces read.
const (
	MetricStep           = "step"
	MetricTotalSteps     = "total_steps"
	MetricEpoch          = "epoch"
	MetricCheckpointStep = "checkpoint_step"
	MetricCheckpointPath = "checkpoint_path"
)

// Charted says whether a metric gets a history (a curve): all but the x axis and the
// checkpoint's bookkeeping.
func Charted(name string) bool {
	switch name {
	case MetricStep, MetricTotalSteps, MetricCheckpointStep, MetricCheckpointPath:
		return false
	}
	return true
}

// MetricInt reads a metric's value as a whole number ("1200", or "1200.0" as some trainers
// format every number); false when it is not a number.
func MetricInt(value string) (int64, bool) {
	value = strings.TrimSpace(value)
	if n, err := strconv.ParseInt(value, 10, 64); err == nil {
		return n, true
	}
	if f, err := strconv.ParseFloat(value, 64); err == nil {
		return int64(f), true
	}
	return 0, false
}

// TrainJobMetricsKind is the kind of TrainJobMetrics.
const TrainJobMetricsKind = "TrainJobMetrics"

// Bounds of a TrainJobMetrics: whatever the length of the run, its object stays well under
// etcd's object size limit.
const (
	// MaxMetricSeries is how many metrics a history keeps (the first numeric ones reported).
	MaxMetricSeries = 32
	// MaxPointsPerSeries is how many points a metric's history keeps: past it, every other
	// point is dropped and the series keeps one report in twice as many from then on.
	MaxPointsPerSeries = 500
)

// TrainJobMetrics is the history of the numeric metrics a TrainJob's trainer reported
// through the status server (the TrainJob's status.trainerStatus holds only the latest):
// per metric at most MaxPointsPerSeries points spread evenly over the whole run. Kiln's
// operator writes it, named after its TrainJob and owned by it, so it goes with the job.
//
// +kubebuilder:object:root=true
// +kubebuilder:resource:shortName=tjm
// +kubebuilder:printcolumn:name="Series",type=integer,JSONPath=`.status.seriesCount`
// +kubebuilder:printcolumn:name="Last Update",type=date,JSONPath=`.status.lastUpdateTime`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type TrainJobMetrics struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// Series are the metrics' histories, by name.
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=32
	// +optional
	Series []MetricSeries `json:"series,omitempty"`

	// Status summarizes the history.
	// +optional
	Status TrainJobMetricsStatus `json:"status,omitempty"`
}

// MetricSeries is one metric over time, in columns: point i is (times[i], steps[i],
// values[i]); steps is empty when the trainer reported no step.
// +kubebuilder:validation:XValidation:rule="size(self.times) == size(self.values)",message="times and values must be as long"
// +kubebuilder:validation:XValidation:rule="!has(self.steps) || size(self.steps) == 0 || size(self.steps) == size(self.times)",message="steps is empty or as long as times"
type MetricSeries struct {
	// Name of the metric, e.g. loss.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=64
	// +required
	Name string `json:"name"`
	// Count is how many reports of the metric the history has seen.
	// +kubebuilder:validation:Minimum=0
	// +required
	Count int64 `json:"count"`
	// Stride is how many reports one point stands for: the series keeps the reports whose
	// number (counting from 0) is a multiple of it. It doubles, and every other point is
	// dropped, each time the series reaches MaxPointsPerSeries points.
	// +kubebuilder:validation:Minimum=1
	// +required
	Stride int64 `json:"stride"`
	// Times of the points, Unix seconds.
	// +kubebuilder:validation:MaxItems=500
	// +listType=atomic
	// +required
	Times []int64 `json:"times"`
	// Steps of the points (the trainer's step metric), when it reported one.
	// +kubebuilder:validation:MaxItems=500
	// +listType=atomic
	// +optional
	Steps []int64 `json:"steps,omitempty"`
	// Values of the points, as decimal numbers (strings, as the trainer reports them).
	// +kubebuilder:validation:MaxItems=500
	// +kubebuilder:validation:items:MaxLength=32
	// +listType=atomic
	// +required
	Values []string `json:"values"`
}

// TrainJobMetricsStatus summarizes a TrainJobMetrics.
type TrainJobMetricsStatus struct {
	// SeriesCount is len(series).
	// +optional
	SeriesCount int32 `json:"seriesCount,omitempty"`
	// Reports counts the reports folded into the history.
	// +optional
	Reports int64 `json:"reports,omitempty"`
	// LastUpdateTime is the time of the newest report folded in.
	// +optional
	LastUpdateTime *metav1.Time `json:"lastUpdateTime,omitempty"`
}

// +kubebuilder:object:root=true

// TrainJobMetricsList is a list of TrainJobMetrics.
type TrainJobMetricsList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []TrainJobMetrics `json:"items"`
}

// ParseProgressDeadline reads a kiln.dev/progress-deadline value: a positive Go duration.
func ParseProgressDeadline(v string) (time.Duration, error) {
	d, err := time.ParseDuration(v)
	if err != nil || d <= 0 {
		return 0, fmt.Errorf("%q is not a positive duration: use e.g. 15m or 1h30m (a bare number has no unit)", v)
	}
	return d, nil
}
