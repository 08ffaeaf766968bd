package trainjob

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	trainer "github.com/kiln-ml/kiln/api/trainer/v1alpha1"
)

// The TTL after finishing: status.completionTime is set when the job completes or fails;
// at completionTime + ttlSecondsAfterFinished the TrainJob is deleted, and everything it
// owns with it.

// applyTTL sets st.completionTime (to stamp) on a finished job and returns how long until
// its TTL expires (0: none pending), or the event of a TTL that expired.
func applyTTL(st *trainer.TrainJobStatus, policy trainer.EffectiveRunPolicy, stamp metav1.Time, now time.Time) (time.Duration, *event) {
	if !trainer.Finished(st) {
		return 0, nil
	}
	if st.CompletionTime == nil {
		st.CompletionTime = &stamp
	}
	if policy.TTLSecondsAfterFinished == nil {
		return 0, nil
	}
	due := st.CompletionTime.Add(time.Duration(*policy.TTLSecondsAfterFinished) * time.Second)
	if now.Before(due) {
		return due.Sub(now), nil
	}
	return 0, &event{kind: corev1.EventTypeNormal, reason: ReasonTTLExpired,
		note: fmt.Sprintf("TrainJob finished %ds ago, its ttlSecondsAfterFinished: deleting it and everything it owns", *policy.TTLSecondsAfterFinished)}
}

// deleteExpired deletes a TrainJob whose TTL expired. Its JobSet, pods, services, config
// maps and secrets go with it (owner references). It reports whether this call deleted it
// (not when it was gone already).
func (r *Reconciler) deleteExpired(ctx context.Context, tj *trainer.TrainJob) (bool, error) {
	start := time.Now()
	err := r.client.Delete(ctx, tj, client.PropagationPolicy(metav1.DeletePropagationBackground))
	traceStep(ctx, "delete TrainJob", start, client.IgnoreNotFound(err))
	if apierrors.IsNotFound(err) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("deleting the TrainJob after its TTL: %w", err)
	}
	return true, nil
}
