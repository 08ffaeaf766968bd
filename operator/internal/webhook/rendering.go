package webhook

import (
	"fmt"
	"strconv"
	"strings"

	batchv1 "k8s.io/api/batch/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/ptr"
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"

	trainer "github.com/kiln-ml/kiln/api/trainer/v1alpha1"
	"github.com/kiln-ml/kiln/operator/internal/render"
)

// A TrainJob is refused at admission when what the controller would render from it can
// never be created: a JobSet that JobSet's own webhook refuses would otherwise leave the job
// admitted by Kueue, holding its quota, with nothing running.

// maxNodes is the most nodes a TrainJob may ask for: an Indexed Job (one pod per node) may
// have at most 100,000 completions. Checked before anything is rendered, so that no request
// makes the webhook or the controller build a hostfile of a billion lines.
const maxNodes = 100_000

// maxConfigMapBytes is the apiserver's limit on a ConfigMap's data (corev1.MaxSecretSize).
const maxConfigMapBytes = 1 << 20

// podNameSuffix stands for the five random characters the Job controller appends to a pod's
// name, as JobSet's webhook counts them.
const podNameSuffix = "-abcde"

// validateSize refuses node and process counts that can never run.
func validateSize(tj *trainer.TrainJob) field.ErrorList {
	var errs field.ErrorList
	t := tj.Spec.Trainer
	if t == nil {
		return nil
	}
	path := field.NewPath("spec", "trainer")
	if n := t.NumNodes; n != nil && *n < 1 {
		errs = append(errs, field.Invalid(path.Child("numNodes"), *n, "must be at least 1: set the number of nodes to train on, or leave it out for the runtime's"))
	}
	if n := t.NumNodes; n != nil && *n > maxNodes {
		errs = append(errs, field.Invalid(path.Child("numNodes"), *n, fmt.Sprintf("must be at most %d, the most pods an Indexed Job runs", maxNodes)))
	}
	if n := t.NumProcPerNode; n != nil && *n < 1 {
		errs = append(errs, field.Invalid(path.Child("numProcPerNode"), *n, "must be at least 1: set the processes per node, or leave it out for the runtime's"))
	}
	return errs
}

// validateRendering renders the TrainJob as the controller will and applies the rules the
// rendering must pass: it renders at all, and every name JobSet derives from the TrainJob's
// (the JobSet and its Service, each Job, each pod and so each pod's hostname) fits in a DNS
// label, as JobSet's webhook requires.
func validateRendering(tj *trainer.TrainJob, rt *trainer.TrainingRuntimeSpec) (*render.Result, field.ErrorList) {
	res, err := render.Render(tj, rt)
	if err != nil {
		path := field.NewPath("spec", "runtimeRef")
		if strings.HasPrefix(err.Error(), "spec.runtimePatches") {
			path = field.NewPath("spec", "runtimePatches")
		}
		return nil, field.ErrorList{field.Invalid(path, tj.Spec.RuntimeRef.Name, fmt.Sprintf(
			"this TrainJob cannot be rendered on runtime %q: %v", tj.Spec.RuntimeRef.Name, err))}
	}
	if cm := res.HostfileConfigMap; cm != nil {
		size := 0
		for k, v := range cm.Data {
			size += len(k) + len(v)
		}
		if size > maxConfigMapBytes {
			var nodes any = "(the runtime's)"
			if t := tj.Spec.Trainer; t != nil && t.NumNodes != nil {
				nodes = *t.NumNodes
			}
			return nil, field.ErrorList{field.Invalid(field.NewPath("spec", "trainer", "numNodes"), nodes,
				fmt.Sprintf("too many nodes for an MPI runtime: the hostfile listing them would take %d bytes, more than a ConfigMap holds (%d): use fewer nodes", size, maxConfigMapBytes))}
		}
	}
	longest, suffix := longestDerivedName(res.JobSet)
	if longest == "" || len(validation.IsDNS1035Label(longest)) == 0 {
		return res, nil
	}
	name := field.NewPath("metadata", "name")
	value := tj.Name
	fix := fmt.Sprintf("use a name of at most %d characters", validation.DNS1035LabelMaxLength-len(suffix))
	if tj.GenerateName != "" {
		name = field.NewPath("metadata", "generateName")
		value = tj.GenerateName
		fix = fmt.Sprintf("use a generateName of at most %d characters (the apiserver appends 5)", validation.DNS1035LabelMaxLength-len(suffix)-5)
	}
	if msgs := validation.IsDNS1035Label(tj.Name); len(msgs) > 0 && len(tj.Name) <= validation.DNS1035LabelMaxLength {
		// Not a length problem: the name itself is no DNS label (JobSet's Service is named after it).
		return nil, field.ErrorList{field.Invalid(name, value, strings.Join(msgs, "; ")+": the name of a TrainJob names its JobSet's Service, so it must be a DNS label (lower case letters, digits and '-', starting with a letter)")}
	}
	return nil, field.ErrorList{field.Invalid(name, value, fmt.Sprintf(
		"too long for runtime %q: its pods or Jobs would be named like %s (%d characters; names derived from a TrainJob's must fit in %d, and this runtime adds %d): %s",
		tj.Spec.RuntimeRef.Name, longest, len(longest), validation.DNS1035LabelMaxLength, len(suffix), fix))}
}

// longestDerivedName is the longest name JobSet derives from the JobSet's (a pod's, with the
// Job controller's random suffix, or a Job's), and what it adds to the JobSet's name.
func longestDerivedName(js *jobsetv1alpha2.JobSet) (string, string) {
	var longest string
	for _, rj := range js.Spec.ReplicatedJobs {
		lastJob := strconv.Itoa(int(max(rj.Replicas, 1) - 1))
		candidates := []string{fmt.Sprintf("%s-%s-%s", js.Name, rj.Name, lastJob)}
		// JobSet's defaulting makes every Job Indexed unless it says otherwise.
		if ptr.Deref(rj.Template.Spec.CompletionMode, batchv1.IndexedCompletion) == batchv1.IndexedCompletion {
			lastPod := strconv.Itoa(int(max(ptr.Deref(rj.Template.Spec.Completions, 1), 1) - 1))
			candidates = append(candidates, fmt.Sprintf("%s-%s-%s-%s%s", js.Name, rj.Name, lastJob, lastPod, podNameSuffix))
		}
		for _, c := range candidates {
			if len(c) > len(longest) {
				longest = c
			}
		}
	}
	return longest, strings.TrimPrefix(longest, js.Name)
}
