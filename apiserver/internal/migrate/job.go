package migrate

import (
	"fmt"

	batchv1 "k8s.io/api/batch/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kiln "github.com/kiln-ml/kiln/api/kiln/v1alpha1"
	trainer "github.com/kiln-ml/kiln/api/trainer/v1alpha1"
)

// convertJob: a batch/v1 Job becomes a one-node TrainJob running its container, with its
// deadline and TTL (whose meaning on Kiln is the KEP-2899 one).
func convertJob(doc []byte, c *conversion) (client.Object, error) {
	var src batchv1.Job
	if err := unknownFields(doc, &src, c); err != nil {
		return nil, err
	}
	if src.Name == "" {
		return nil, fmt.Errorf("metadata.name: a Job needs a name")
	}
	spec, err := trainJobSpecFromJob(src.Spec, "spec", c)
	if err != nil {
		return nil, err
	}
	return &trainer.TrainJob{
		TypeMeta:   metav1.TypeMeta{APIVersion: trainer.GroupVersion.String(), Kind: trainer.TrainJobKind},
		ObjectMeta: objectMeta(src.ObjectMeta),
		Spec:       spec,
	}, nil
}

// convertCronJob: a batch/v1 CronJob becomes a CronTrainJob with the same schedule and
// policies, its job template converted as a Job is.
func convertCronJob(doc []byte, c *conversion) (client.Object, error) {
	var src batchv1.CronJob
	if err := unknownFields(doc, &src, c); err != nil {
		return nil, err
	}
	if src.Name == "" {
		return nil, fmt.Errorf("metadata.name: a CronJob needs a name")
	}
	if src.Spec.Schedule == "" {
		return nil, fmt.Errorf("spec.schedule: a CronJob needs a schedule")
	}
	spec, err := trainJobSpecFromJob(src.Spec.JobTemplate.Spec, "spec.jobTemplate.spec", c)
	if err != nil {
		return nil, err
	}
	cj := &kiln.CronTrainJob{
		TypeMeta:   metav1.TypeMeta{APIVersion: kiln.GroupVersion.String(), Kind: kiln.CronTrainJobKind},
		ObjectMeta: objectMeta(src.ObjectMeta),
		Spec: kiln.CronTrainJobSpec{
			Schedule: src.Spec.Schedule, TimeZone: src.Spec.TimeZone, StartingDeadlineSeconds: src.Spec.StartingDeadlineSeconds,
			ConcurrencyPolicy: kiln.ConcurrencyPolicy(src.Spec.ConcurrencyPolicy), Suspend: src.Spec.Suspend,
			SuccessfulJobsHistoryLimit: src.Spec.SuccessfulJobsHistoryLimit, FailedJobsHistoryLimit: src.Spec.FailedJobsHistoryLimit,
			TrainJobTemplate: kiln.TrainJobTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: src.Spec.JobTemplate.Labels, Annotations: src.Spec.JobTemplate.Annotations},
				Spec:       spec,
			},
		},
	}
	if cj.Spec.ConcurrencyPolicy == "" {
		cj.Spec.ConcurrencyPolicy = kiln.AllowConcurrent
	}
	return cj, nil
}

// trainJobSpecFromJob converts a Job's spec (at path) into a one-node TrainJob's.
func trainJobSpecFromJob(js batchv1.JobSpec, path string, c *conversion) (trainer.TrainJobSpec, error) {
	fp, err := fromPod(js.Template, path+".template", "", c)
	if err != nil {
		return trainer.TrainJobSpec{}, err
	}
	fp.trainer.NumNodes = ptr.To[int32](1)
	spec := trainer.TrainJobSpec{
		RuntimeRef:              trainer.RuntimeRef{Name: c.runtime()},
		Trainer:                 fp.trainer,
		ActiveDeadlineSeconds:   js.ActiveDeadlineSeconds,
		TTLSecondsAfterFinished: js.TTLSecondsAfterFinished,
	}
	if fp.patch != nil {
		spec.RuntimePatches = []trainer.RuntimePatch{*fp.patch}
	}
	if ptr.Deref(js.Suspend, false) {
		spec.Suspend = ptr.To(true)
	}
	if js.Template.Spec.RestartPolicy == "OnFailure" {
		restartPolicy("OnFailure", path+".template.spec.restartPolicy", "the Job", c)
	}
	if p := fp.launch.nprocPerNode; fp.trainer.NumProcPerNode == nil && p != "" && p != "auto" && p != "gpu" {
		c.warn(fp.ctPath+".command", "--nproc_per_node %q: Kiln takes a number of processes per node, or none for one per GPU (else per CPU); left to the runtime", p)
	}
	if js.ActiveDeadlineSeconds != nil {
		c.note(path+".activeDeadlineSeconds", "counts from each admission or resume on Kiln, not from the Job's first start (docs/lifecycle.md)")
	}
	if js.BackoffLimit != nil && *js.BackoffLimit != 6 {
		c.warn(path+".backoffLimit", "%d: Kiln restarts the job's pods up to its runtime's failurePolicy.maxRestarts instead (torch-distributed-spot: 3); choose the runtime for it", *js.BackoffLimit)
	}
	if p, n := ptr.Deref(js.Parallelism, 1), ptr.Deref(js.Completions, 1); p != 1 || n != 1 {
		c.warn(path, "parallelism %d, completions %d: the TrainJob runs one node once; a distributed job sets trainer.numNodes", p, n)
	}
	other := map[string]bool{
		"podFailurePolicy":     js.PodFailurePolicy != nil,
		"successPolicy":        js.SuccessPolicy != nil,
		"backoffLimitPerIndex": js.BackoffLimitPerIndex != nil,
		"maxFailedIndexes":     js.MaxFailedIndexes != nil,
		"completionMode":       js.CompletionMode != nil && *js.CompletionMode != batchv1.NonIndexedCompletion,
		"podReplacementPolicy": js.PodReplacementPolicy != nil,
		"manualSelector":       ptr.Deref(js.ManualSelector, false),
		"managedBy":            js.ManagedBy != nil,
	}
	for _, f := range sortedTrue(other) {
		c.warn(path+"."+f, "a TrainJob's pods follow its runtime's Job policies: not carried over (set it in a runtime of your own)")
	}
	return spec, nil
}
