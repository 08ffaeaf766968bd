package v1alpha1

import (
	"bytes"
	"compress/gzip"
	"fmt"
	"io"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Attempt logs: the last words of each pod of a TrainJob that is deleted (a group restart,
// a preemption, a suspension, the deadline), kept after the pod is gone. Kiln's operator
// puts FinalizerAttemptLogs on every pod of a job; when such a pod is deleted and its
// containers have stopped, it copies the tail of its main container's log into a ConfigMap
// owned by the TrainJob (deleted with it), then lets the pod go.
const (
	// FinalizerAttemptLogs holds a deleted pod until its log's tail is kept.
	FinalizerAttemptLogs = "kiln.dev/attempt-logs"
	// LabelKeepLogs marks the pods whose logs are kept (the operator watches only those).
	LabelKeepLogs = "kiln.dev/keep-logs"
	// LabelAttemptLogsOf names the TrainJob an attempt-logs ConfigMap belongs to.
	LabelAttemptLogsOf = "kiln.dev/attempt-logs-of"
	// LabelAttempt is the attempt (JobSet's restart attempt, from 0) a log is of.
	LabelAttempt = "kiln.dev/attempt"
	// AnnotationLogPod, AnnotationLogContainer and AnnotationLogCapturedAt say whose log a
	// ConfigMap holds and when it was kept; AnnotationLogTruncated that older lines were left out.
	AnnotationLogPod        = "kiln.dev/pod"
	AnnotationLogContainer  = "kiln.dev/container"
	AnnotationLogCapturedAt = "kiln.dev/captured-at"
	AnnotationLogTruncated  = "kiln.dev/truncated"
	// AttemptLogKey is the ConfigMap's binaryData key: the log's tail, gzipped.
	AttemptLogKey = "log.gz"
)

// AttemptLogBytes is how much of each pod's log is kept: its last MiB.
const AttemptLogBytes = 1 << 20

// AttemptsKept is how many of a job's attempts keep their logs; older ones are deleted as
// newer ones are kept, so a job restarted a hundred times stores five attempts' worth.
const AttemptsKept = 5

// AttemptLogName names the ConfigMap of one pod's log after the pod (whose name is unique
// among the job's pods of all attempts: the Job controller gives each a random suffix).
func AttemptLogName(pod string) string {
	return pod + "-logs"
}

// AttemptOf is the attempt a labelled object (a pod of a JobSet, an attempt-logs
// ConfigMap) belongs to, from JobSet's restart-attempt label or Kiln's.
func AttemptOf(labels map[string]string) int {
	for _, key := range []string{LabelAttempt, LabelJobSetRestartAttempt} {
		if v, ok := labels[key]; ok {
			if n, err := strconv.Atoi(v); err == nil {
				return n
			}
		}
	}
	return 0
}

// LabelJobSetRestartAttempt is JobSet's label of a pod's restart attempt (its constant
// lives in an internal package of JobSet).
const LabelJobSetRestartAttempt = "jobset.sigs.k8s.io/restart-attempt"

// AttemptLog is a kept log: whose it was, and its text.
// +kubebuilder:object:generate=false
type AttemptLog struct {
	Attempt    int
	Pod        string
	Container  string
	CapturedAt metav1.Time
	Truncated  bool
	Text       []byte
}

// DecodeAttemptLog reads an attempt-logs ConfigMap.
func DecodeAttemptLog(cm *corev1.ConfigMap) (*AttemptLog, error) {
	zr, err := gzip.NewReader(bytes.NewReader(cm.BinaryData[AttemptLogKey]))
	if err != nil {
		return nil, fmt.Errorf("ConfigMap %s/%s: %s is not gzip: %w", cm.Namespace, cm.Name, AttemptLogKey, err)
	}
	text, err := io.ReadAll(io.LimitReader(zr, 4*AttemptLogBytes))
	if err != nil {
		return nil, fmt.Errorf("ConfigMap %s/%s: %w", cm.Namespace, cm.Name, err)
	}
	out := &AttemptLog{Attempt: AttemptOf(cm.Labels), Pod: cm.Annotations[AnnotationLogPod], Container: cm.Annotations[AnnotationLogContainer],
		Truncated: cm.Annotations[AnnotationLogTruncated] == "true", Text: text}
	if t, err := time.Parse(time.RFC3339, cm.Annotations[AnnotationLogCapturedAt]); err == nil {
		out.CapturedAt = metav1.NewTime(t)
	}
	return out, nil
}

// EncodeAttemptLog gzips the tail of a log (at most AttemptLogBytes, cut at a line) for an
// attempt-logs ConfigMap, and says whether older lines were left out.
func EncodeAttemptLog(log []byte) ([]byte, bool, error) {
	truncated := len(log) > AttemptLogBytes
	if truncated {
		log = log[len(log)-AttemptLogBytes:]
		if i := bytes.IndexByte(log, '\n'); i >= 0 {
			log = log[i+1:]
		}
	}
	var buf bytes.Buffer
	zw, err := gzip.NewWriterLevel(&buf, gzip.BestCompression)
	if err != nil {
		return nil, false, err
	}
	if _, err := zw.Write(log); err != nil {
		return nil, false, err
	}
	if err := zw.Close(); err != nil {
		return nil, false, err
	}
	return buf.Bytes(), truncated, nil
}
