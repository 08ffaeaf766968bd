package view

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/testing/protocmp"
	"google.golang.org/protobuf/types/known/timestamppb"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	kilnv1 "github.com/kiln-ml/kiln/api/gen/kiln/v1"
	trainer "github.com/kiln-ml/kiln/api/trainer/v1alpha1"
)

func TestTrainJobTimers(t *testing.T) {
	start := time.Date(2026, 11, 23, 10, 0, 0, 0, time.UTC)
	done := start.Add(time.Hour)
	running := []metav1.Condition{}
	complete := []metav1.Condition{{Type: trainer.TrainJobComplete, Status: metav1.ConditionTrue, Reason: "AllJobsCompleted"}}
	cases := map[string]struct {
		spec         trainer.TrainJobSpec
		runtime      *trainer.RunPolicy
		conds        []metav1.Condition
		completed    bool
		wantDeadline *timestamppb.Timestamp
		wantTTL      *timestamppb.Timestamp
		wantADS      *int64
		wantTTLSecs  *int32
	}{
		"the job's own deadline": {
			spec: trainer.TrainJobSpec{ActiveDeadlineSeconds: ptr.To[int64](600)}, conds: running,
			wantDeadline: timestamppb.New(start.Add(10 * time.Minute)), wantADS: ptr.To[int64](600),
		},
		"the runtime's deadline when the job has none": {
			runtime: &trainer.RunPolicy{ActiveDeadlineSeconds: ptr.To[int64](60), TTLSecondsAfterFinished: ptr.To[int32](30)}, conds: running,
			wantDeadline: timestamppb.New(start.Add(time.Minute)), wantADS: ptr.To[int64](60), wantTTLSecs: ptr.To[int32](30),
		},
		"the job's own wins over the runtime's": {
			spec:    trainer.TrainJobSpec{ActiveDeadlineSeconds: ptr.To[int64](5)},
			runtime: &trainer.RunPolicy{ActiveDeadlineSeconds: ptr.To[int64](60)}, conds: running,
			wantDeadline: timestamppb.New(start.Add(5 * time.Second)), wantADS: ptr.To[int64](5),
		},
		"a finished job has a TTL instant and no deadline": {
			spec:  trainer.TrainJobSpec{ActiveDeadlineSeconds: ptr.To[int64](600), TTLSecondsAfterFinished: ptr.To[int32](86400)},
			conds: complete, completed: true,
			wantTTL: timestamppb.New(done.Add(24 * time.Hour)), wantADS: ptr.To[int64](600), wantTTLSecs: ptr.To[int32](86400),
		},
		"no policy, no timers": {conds: running},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			tj := &trainer.TrainJob{Spec: tc.spec, Status: trainer.TrainJobStatus{Conditions: tc.conds, StartTime: &metav1.Time{Time: start}}}
			if tc.completed {
				tj.Status.CompletionTime = &metav1.Time{Time: done}
			}
			st := TrainJob(tj, Related{RunPolicy: tc.runtime}).GetStatus()
			if diff := cmp.Diff(tc.wantDeadline, st.GetDeadlineTime(), protocmp.Transform()); diff != "" {
				t.Errorf("deadline_time (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.wantTTL, st.GetTtlDeleteTime(), protocmp.Transform()); diff != "" {
				t.Errorf("ttl_delete_time (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.wantADS, st.ActiveDeadlineSeconds); diff != "" {
				t.Errorf("active_deadline_seconds (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.wantTTLSecs, st.TtlSecondsAfterFinished); diff != "" {
				t.Errorf("ttl_seconds_after_finished (-want +got):\n%s", diff)
			}
		})
	}
}

func TestTrainJobSpec(t *testing.T) {
	tj := &trainer.TrainJob{
		ObjectMeta: metav1.ObjectMeta{Name: "mnist", Namespace: "team", UID: "u1", ResourceVersion: "7",
			Labels:      map[string]string{trainer.KueueQueueNameLabel: "q", trainer.KueuePriorityClassLabel: "high"},
			Annotations: map[string]string{corev1.LastAppliedConfigAnnotation: "{}", "note": "x"}},
		Spec: trainer.TrainJobSpec{
			RuntimeRef: trainer.RuntimeRef{Name: "torch-distributed"},
			Trainer: &trainer.Trainer{
				Image: ptr.To("img"), Command: []string{"torchrun"}, Args: []string{"train.py"}, NumNodes: ptr.To[int32](2), NumProcPerNode: ptr.To[int32](8),
				Env: []corev1.EnvVar{{Name: "A", Value: "1"}, {Name: "S", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{
					LocalObjectReference: corev1.LocalObjectReference{Name: "hf"}, Key: "token"}}}},
				ResourcesPerNode: &corev1.ResourceRequirements{Limits: corev1.ResourceList{"nvidia.com/gpu": resource.MustParse("8")}},
			},
			Initializer: &trainer.Initializer{Dataset: &trainer.DatasetInitializer{StorageUri: ptr.To("hf://data")}},
			Suspend:     ptr.To(true),
		},
	}
	want := &kilnv1.TrainJob{
		Name: "mnist", Namespace: "team", Uid: "u1", ResourceVersion: "7",
		Labels:      map[string]string{trainer.KueueQueueNameLabel: "q", trainer.KueuePriorityClassLabel: "high"},
		Annotations: map[string]string{"note": "x"},
		Spec: &kilnv1.TrainJobSpec{
			Runtime: "torch-distributed", RuntimeKind: kilnv1.RuntimeKind_RUNTIME_KIND_CLUSTER, Image: "img",
			Command: []string{"torchrun"}, Args: []string{"train.py"}, Nodes: 2, ProcsPerNode: 8,
			Env:              []*kilnv1.EnvVar{{Name: "A", Value: "1"}, {Name: "S", Value: "(from secret hf/token)"}},
			ResourcesPerNode: &kilnv1.Resources{Limits: map[string]string{"nvidia.com/gpu": "8"}},
			DatasetUri:       "hf://data", Queue: "q", PriorityClass: "high", Suspend: true,
		},
	}
	got := TrainJob(tj, Related{})
	got.Status = nil
	if diff := cmp.Diff(want, got, protocmp.Transform()); diff != "" {
		t.Errorf("TrainJob() mismatch (-want +got):\n%s", diff)
	}
}
