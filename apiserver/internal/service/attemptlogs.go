package service

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"connectrpc.com/connect"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/klog/v2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kilnv1 "github.com/kiln-ml/kiln/api/gen/kiln/v1"
	kiln "github.com/kiln-ml/kiln/api/kiln/v1alpha1"
	trainer "github.com/kiln-ml/kiln/api/trainer/v1alpha1"
	"github.com/kiln-ml/kiln/apiserver/internal/kube"
	"github.com/kiln-ml/kiln/apiserver/internal/view"
)

// The logs of an earlier attempt: the operator keeps the tail of each deleted pod's log in a
// ConfigMap the TrainJob owns (package attemptlogs). The server reads them with its own
// identity once the caller may read the job's pod logs (get pods/log in its namespace), so a
// user needs no access to ConfigMaps.

// attemptLog is one kept log, with the step it belongs to.
type attemptLog struct {
	*kiln.AttemptLog
	key  view.StepKey
	step string
}

// validateAttemptLogs checks what a request for kept logs may combine.
func validateAttemptLogs(m *kilnv1.StreamLogsRequest) field.ErrorList {
	var errs field.ErrorList
	if m.Attempt != nil && *m.Attempt < 0 {
		errs = append(errs, field.Invalid(field.NewPath("attempt"), *m.Attempt, "must be 0 or more (the first attempt is 0)"))
	}
	if m.Attempt != nil && m.GetPrevious() {
		errs = append(errs, field.Invalid(field.NewPath("previous"), true, "set attempt or previous, not both"))
	}
	if (m.Attempt != nil || m.GetPrevious()) && m.GetFollow() {
		errs = append(errs, field.Invalid(field.NewPath("follow"), true, "an earlier attempt's log is complete: leave out follow (or attempt and previous)"))
	}
	return errs
}

// streamAttemptLogs streams the attempt logs of the asked attempt, step after step.
func (l *logStreamer) streamAttemptLogs(ctx context.Context) error {
	attrs := kube.Attributes{Verb: "get", Resource: "pods", Subresource: "log", Namespace: l.tj.Namespace}
	ok, reason, err := l.s.kube.Authorizer.Allowed(ctx, attrs)
	if err != nil {
		return toConnect(l.what, err)
	}
	if !ok {
		return denied(caller(ctx), attrs.String(), reason)
	}
	logs, err := l.attemptLogs(ctx)
	if err != nil {
		return err
	}
	attempts := map[int]bool{}
	for _, k := range logs {
		attempts[k.Attempt] = true
	}
	want, err := l.wantedAttempt(ctx, attempts)
	if err != nil {
		return err
	}
	var steps []string
	for _, k := range logs {
		if k.Attempt != want {
			continue
		}
		steps = append(steps, k.step)
		if l.req.GetStep() != "" && k.step != l.req.GetStep() {
			continue
		}
		if err := l.emit(ctx, k); err != nil {
			return err
		}
	}
	if l.req.GetStep() != "" && !slices.Contains(steps, l.req.GetStep()) {
		return connect.NewError(connect.CodeNotFound, fmt.Errorf("%s: attempt %d kept no log of step %q: its steps are %s", l.what, want, l.req.GetStep(), listOrNone(steps)))
	}
	return nil
}

// wantedAttempt is the attempt asked for: the request's, or for previous the newest kept
// attempt before the pods of now (the newest kept, when the job has no pods left).
func (l *logStreamer) wantedAttempt(ctx context.Context, kept map[int]bool) (int, error) {
	keptList := slices.Sorted(func(yield func(int) bool) {
		for a := range kept {
			if !yield(a) {
				return
			}
		}
	})
	names := make([]string, len(keptList))
	for i, a := range keptList {
		names[i] = strconv.Itoa(a)
	}
	if l.req.Attempt != nil {
		want := int(*l.req.Attempt)
		if !kept[want] {
			return 0, connect.NewError(connect.CodeNotFound, fmt.Errorf("%s: no log of attempt %d was kept; kept attempts: %s (the operator keeps the last MiB of each deleted pod's log, of the newest %d attempts)",
				l.what, want, cmp.Or(strings.Join(names, ", "), "none"), kiln.AttemptsKept))
		}
		return want, nil
	}
	current := -1
	pods := &corev1.PodList{}
	if err := l.s.kube.AsCaller.List(ctx, pods, client.InNamespace(l.tj.Namespace), l.podSelector()); err != nil {
		return 0, toConnect(l.what, err)
	}
	for i := range pods.Items {
		if pods.Items[i].DeletionTimestamp == nil {
			current = max(current, kiln.AttemptOf(pods.Items[i].Labels))
		}
	}
	for _, a := range slices.Backward(keptList) {
		if current < 0 || a < current {
			return a, nil
		}
	}
	return 0, connect.NewError(connect.CodeNotFound, fmt.Errorf("%s: there is no previous attempt: no pod of this job was deleted (a restart, a preemption, a suspension or the deadline keeps its log)", l.what))
}

// keptConfigMaps lists the ConfigMaps of the job's kept logs (not a namesake's, left behind).
func (s *TrainJobs) keptConfigMaps(ctx context.Context, tj *trainer.TrainJob) ([]corev1.ConfigMap, error) {
	list, err := s.kube.Self.CoreV1().ConfigMaps(tj.Namespace).List(ctx, metav1.ListOptions{
		LabelSelector: labels.SelectorFromSet(labels.Set{kiln.LabelAttemptLogsOf: tj.Name}).String(),
	})
	if err != nil {
		return nil, err
	}
	return slices.DeleteFunc(list.Items, func(cm corev1.ConfigMap) bool { return !metav1.IsControlledBy(&cm, tj) }), nil
}

// keptAttempts are the attempts of the job whose logs were kept, oldest first, when the
// caller may read the job's logs (else none): from the kept logs' metadata in the cache.
func (s *TrainJobs) keptAttempts(ctx context.Context, tj *trainer.TrainJob) []int32 {
	attrs := kube.Attributes{Verb: "get", Resource: "pods", Subresource: "log", Namespace: tj.Namespace}
	if ok, _, err := s.kube.Authorizer.Allowed(ctx, attrs); err != nil || !ok {
		return nil
	}
	list := &metav1.PartialObjectMetadataList{}
	list.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("ConfigMapList"))
	if err := s.kube.KeptLogs.List(ctx, list, client.InNamespace(tj.Namespace), client.MatchingFields{kube.IndexAttemptLogsOf: tj.Name}, client.UnsafeDisableDeepCopy); err != nil {
		klog.FromContext(ctx).V(2).Info("Could not read a TrainJob's kept logs", "trainJob", klog.KObj(tj), "err", err)
		return nil
	}
	var out []int32
	for i := range list.Items {
		cm := &list.Items[i]
		// A namesake's left behind is not this job's.
		if a := int32(kiln.AttemptOf(cm.Labels)); metav1.IsControlledBy(cm, tj) && !slices.Contains(out, a) {
			out = append(out, a)
		}
	}
	slices.Sort(out)
	return out
}

// attemptLogs reads the job's kept logs, ordered by attempt, then step, then when kept.
func (l *logStreamer) attemptLogs(ctx context.Context) ([]attemptLog, error) {
	cms, err := l.s.keptConfigMaps(ctx, l.tj)
	if err != nil {
		return nil, toConnect(l.what+": reading the kept logs", err)
	}
	var out []attemptLog
	multiJob := map[string]bool{}
	for i := range cms {
		cm := &cms[i]
		log, err := kiln.DecodeAttemptLog(cm)
		if err != nil {
			continue
		}
		key, ok := view.StepKeyOf(&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Labels: cm.Labels}})
		if !ok {
			continue
		}
		if key.JobIndex > 0 {
			multiJob[key.ReplicatedJob] = true
		}
		out = append(out, attemptLog{AttemptLog: log, key: key})
	}
	for i := range out {
		out[i].step = out[i].key.Name(multiJob[out[i].key.ReplicatedJob])
	}
	slices.SortFunc(out, func(a, b attemptLog) int {
		return cmp.Or(cmp.Compare(a.Attempt, b.Attempt), view.CompareSteps(a.key, b.key), a.CapturedAt.Compare(b.CapturedAt.Time))
	})
	return out, nil
}

// emit sends a kept log's lines (its last tail_lines, when asked).
func (l *logStreamer) emit(ctx context.Context, k attemptLog) error {
	var lines []string
	sc := bufio.NewScanner(bytes.NewReader(k.Text))
	sc.Buffer(make([]byte, 0, 64<<10), kiln.AttemptLogBytes)
	for sc.Scan() {
		lines = append(lines, sc.Text())
	}
	if n := l.req.TailLines; n != nil && int(*n) < len(lines) {
		lines = lines[len(lines)-int(*n):]
	}
	for _, text := range lines {
		select {
		case l.out <- &kilnv1.LogLine{Step: k.step, Pod: k.Pod, Container: k.Container, Text: text, Attempt: int32(k.Attempt)}:
		case <-ctx.Done():
			return nil
		}
	}
	return nil
}
