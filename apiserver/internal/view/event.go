package view

import (
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"
	corev1 "k8s.io/api/core/v1"

	kilnv1 "github.com/kiln-ml/kiln/api/gen/kiln/v1"
)

// Event is the API's view of a Kubernetes event.
func Event(e *corev1.Event) *kilnv1.Event {
	out := &kilnv1.Event{
		Type:    e.Type,
		Reason:  e.Reason,
		Message: e.Message,
		Object:  e.InvolvedObject.Kind + "/" + e.InvolvedObject.Name,
		Count:   max(e.Count, 1),
		Source:  e.ReportingController,
	}
	if out.Source == "" {
		out.Source = e.Source.Component
	}
	first, last := EventTimes(e)
	out.FirstTime, out.LastTime = timestamppb.New(first), timestamppb.New(last)
	if e.Series != nil {
		out.Count = max(e.Series.Count, 1)
	}
	return out
}

// EventTimes are when an event first and last happened, whichever API wrote it.
func EventTimes(e *corev1.Event) (first, last time.Time) {
	first, last = e.FirstTimestamp.Time, e.LastTimestamp.Time
	if first.IsZero() {
		first = e.EventTime.Time
	}
	if e.Series != nil && !e.Series.LastObservedTime.IsZero() {
		last = e.Series.LastObservedTime.Time
	}
	if last.IsZero() {
		last = first
	}
	if first.IsZero() {
		first = e.CreationTimestamp.Time
		last = first
	}
	return first, last
}
