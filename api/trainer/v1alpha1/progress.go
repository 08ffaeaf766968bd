package v1alpha1

import "time"

// LastSignOfLife is when a TrainJob last showed it makes progress, for Kiln's progress
// deadline (kiln.dev/progress-deadline): the latest of the trainer's last report, the job's
// start (status.startTime: a suspension clears it and a resume or a Kueue admission sets it
// again, so time queued or suspended never counts) and its pods' last restart. Nil when the
// trainer never reported, or the job is not running (suspended, or not started).
func LastSignOfLife(tj *TrainJob) *time.Time {
	st := &tj.Status
	if st.TrainerStatus == nil || st.StartTime == nil || (tj.Spec.Suspend != nil && *tj.Spec.Suspend) {
		return nil
	}
	last := st.TrainerStatus.LastUpdatedTime.Time
	if st.StartTime.After(last) {
		last = st.StartTime.Time
	}
	if st.Restarts != nil && st.Restarts.LastRestartTime != nil && st.Restarts.LastRestartTime.After(last) {
		last = st.Restarts.LastRestartTime.Time
	}
	return &last
}
