package v1alpha1

// EffectiveRunPolicy is the deadline and TTL that apply to a TrainJob: its own values,
// else the runtime's runPolicy (as it was when the TrainJob was first reconciled), else none.
type EffectiveRunPolicy struct {
	ActiveDeadlineSeconds   *int64
	TTLSecondsAfterFinished *int32
}

// ResolveRunPolicy returns the effective run policy of spec under the runtime's runPolicy,
// which may be nil.
func ResolveRunPolicy(spec *TrainJobSpec, runtime *RunPolicy) EffectiveRunPolicy {
	var out EffectiveRunPolicy
	if runtime != nil {
		out.ActiveDeadlineSeconds = runtime.ActiveDeadlineSeconds
		out.TTLSecondsAfterFinished = runtime.TTLSecondsAfterFinished
	}
	if spec.ActiveDeadlineSeconds != nil {
		out.ActiveDeadlineSeconds = spec.ActiveDeadlineSeconds
	}
	if spec.TTLSecondsAfterFinished != nil {
		out.TTLSecondsAfterFinished = spec.TTLSecondsAfterFinished
	}
	return out
}
