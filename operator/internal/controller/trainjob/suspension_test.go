package trainjob

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	trainer "github.com/kiln-ml/kiln/api/trainer/v1alpha1"
	"github.com/kiln-ml/kiln/operator/internal/controller"
)

func TestUnsuspendedAt(t *testing.T) {
	t0 := time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)
	entry := func(manager string, at time.Duration, subresource, fields string) metav1.ManagedFieldsEntry {
		return metav1.ManagedFieldsEntry{Manager: manager, Operation: metav1.ManagedFieldsOperationUpdate, Subresource: subresource,
			Time: ptr.To(metav1.NewTime(t0.Add(at))), FieldsType: "FieldsV1", FieldsV1: metav1.NewFieldsV1(fields)}
	}
	const suspend = `{"f:spec":{"f:suspend":{}}}`
	const labels = `{"f:metadata":{"f:labels":{"f:team":{}}}}`
	cases := map[string]struct {
		suspend *bool
		fields  []metav1.ManagedFieldsEntry
		now     time.Duration
		want    *time.Duration
	}{
		"resumed by a patch while nobody looked": {
			suspend: ptr.To(false), now: time.Hour,
			fields: []metav1.ManagedFieldsEntry{entry("kubectl-create", 0, "", suspend), entry("kubectl-patch", 10*time.Minute, "", suspend)},
			want:   ptr.To(10 * time.Minute),
		},
		"other writers and the status do not count": {
			suspend: ptr.To(false), now: time.Hour,
			fields: []metav1.ManagedFieldsEntry{entry("kubectl-patch", 10*time.Minute, "", suspend), entry("labeller", 20*time.Minute, "", labels),
				entry("kiln-trainjob-controller", 30*time.Minute, "status", `{"f:status":{"f:startTime":{}}}`)},
			want: ptr.To(10 * time.Minute),
		},
		"suspended": {
			suspend: ptr.To(true), now: time.Hour,
			fields: []metav1.ManagedFieldsEntry{entry("kubectl-patch", 10*time.Minute, "", suspend)},
		},
		"never set": {now: time.Hour, fields: []metav1.ManagedFieldsEntry{entry("kubectl-create", 0, "", labels)}},
		"never after now (clock skew)": {
			suspend: ptr.To(false), now: time.Minute,
			fields: []metav1.ManagedFieldsEntry{entry("kubectl-patch", 2*time.Minute, "", suspend)},
			want:   ptr.To(time.Minute),
		},
		"never before creation": {
			suspend: ptr.To(false), now: time.Hour,
			fields: []metav1.ManagedFieldsEntry{entry("kubectl-create", -time.Minute, "", suspend)},
			want:   ptr.To(time.Duration(0)),
		},
		"garbage fields are ignored": {
			suspend: ptr.To(false), now: time.Hour,
			fields: []metav1.ManagedFieldsEntry{entry("x", time.Minute, "", `not json`)},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			tj := &trainer.TrainJob{ObjectMeta: metav1.ObjectMeta{CreationTimestamp: metav1.NewTime(t0), ManagedFields: tc.fields},
				Spec: trainer.TrainJobSpec{Suspend: tc.suspend}}
			got := controller.UnsuspendedAt(tj, t0.Add(tc.now))
			switch {
			case tc.want == nil && got != nil:
				t.Fatalf("got %v, want none", got)
			case tc.want != nil && (got == nil || !got.Equal(t0.Add(*tc.want))):
				t.Fatalf("got %v, want %v", got, t0.Add(*tc.want))
			}
		})
	}
}

func TestActiveFromTheLaterOfAdmissionAndResume(t *testing.T) {
	t0 := time.Date(2026, 11, 27, 10, 0, 0, 0, time.UTC)
	at := func(d time.Duration) *time.Time { return ptr.To(t0.Add(d)) }
	cases := map[string]struct{ admitted, resumed, want *time.Time }{
		"not queued: the resume":                                        {resumed: at(time.Minute), want: at(time.Minute)},
		"resumed long after Kueue admitted it":                          {admitted: at(0), resumed: at(6 * time.Minute), want: at(6 * time.Minute)},
		"spec.suspend last written before the admission: the admission": {admitted: at(time.Minute), resumed: at(0), want: at(time.Minute)},
		"who resumed it is unknown: the admission":                      {admitted: at(time.Minute), want: at(time.Minute)},
		"neither: nil (counts from now)":                                {},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got := activeFrom(tc.admitted, tc.resumed)
			if (got == nil) != (tc.want == nil) || (got != nil && !got.Equal(*tc.want)) {
				t.Fatalf("activeFrom = %v, want %v", got, tc.want)
			}
		})
	}
}
