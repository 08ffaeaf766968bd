package controller

import (
	"encoding/json"
	"time"

	trainer "github.com/kiln-ml/kiln/api/trainer/v1alpha1"
)

// unsuspendedAt is when a running TrainJob was last resumed, read from its managedFields:
// the latest instant at which a writer that owns spec.suspend changed the TrainJob. The
// resume happened at or before that instant and after the job was created, so a deadline
// counted from it is never early, and, unlike counting from when the operator first looks,
// it is not late by however long the operator was away. Nil when no writer owns
// spec.suspend (it was never set), or the job is suspended.
func unsuspendedAt(tj *trainer.TrainJob, now time.Time) *time.Time {
	if tj.Spec.Suspend == nil || *tj.Spec.Suspend {
		return nil
	}
	var latest *time.Time
	for _, mf := range tj.ManagedFields {
		if mf.Subresource != "" || mf.Time == nil || mf.FieldsV1 == nil || !ownsSuspend(mf.FieldsV1.Raw) {
			continue
		}
		if t := mf.Time.Time; latest == nil || t.After(*latest) {
			latest = &t
		}
	}
	if latest == nil {
		return nil
	}
	if created := tj.CreationTimestamp.Time; latest.Before(created) {
		*latest = created
	}
	if latest.After(now) {
		*latest = now
	}
	return latest
}

func ownsSuspend(fieldsV1 []byte) bool {
	var fields struct {
		Spec map[string]json.RawMessage `json:"f:spec"`
	}
	if err := json.Unmarshal(fieldsV1, &fields); err != nil {
		return false
	}
	_, ok := fields.Spec["f:suspend"]
	return ok
}
