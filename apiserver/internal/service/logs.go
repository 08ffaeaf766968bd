package service

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/types/known/timestamppb"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"

	kilnv1 "github.com/kiln-ml/kiln/api/gen/kiln/v1"
	kiln "github.com/kiln-ml/kiln/api/kiln/v1alpha1"
	trainer "github.com/kiln-ml/kiln/api/trainer/v1alpha1"
	"github.com/kiln-ml/kiln/apiserver/internal/view"
)

// Tuning of StreamLogs.
const (
	// logBatch is the most lines one message carries.
	logBatch = 256
	// terminatedLogGrace is how long a followed stream of a pod that ended may still
	// deliver its last lines before it is closed (some runtimes never close it).
	terminatedLogGrace = 2 * time.Second
	// jobPollInterval is how often a follow checks whether the job finished.
	jobPollInterval = time.Second
)

// StreamLogs implements kilnv1connect.TrainJobServiceHandler. Pods and their logs are read
// as the caller (list pods, get pods/log).
func (s *TrainJobs) StreamLogs(ctx context.Context, req *connect.Request[kilnv1.StreamLogsRequest], stream *connect.ServerStream[kilnv1.StreamLogsResponse]) error {
	m := req.Msg
	errs := validateRef(m.GetNamespace(), m.GetName())
	if n := m.TailLines; n != nil && *n < 0 {
		errs = append(errs, field.Invalid(field.NewPath("tail_lines"), *n, "must be 0 or more"))
	}
	if n := m.SinceSeconds; n != nil && *n < 1 {
		errs = append(errs, field.Invalid(field.NewPath("since_seconds"), *n, "must be at least 1"))
	}
	errs = append(errs, validateAttemptLogs(m)...)
	if len(errs) > 0 {
		return invalid(errs)
	}
	tj, err := s.get(ctx, m.GetNamespace(), m.GetName())
	if err != nil {
		return err
	}
	if err := s.dispatchedElsewhere(ctx, tj); err != nil {
		return err
	}
	l := &logStreamer{s: s, req: m, tj: tj, out: make(chan *kilnv1.LogLine, logBatch), what: fmt.Sprintf("streaming logs of TrainJob %s/%s", tj.Namespace, tj.Name)}
	done := make(chan error, 1)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		switch {
		case m.Attempt != nil || m.GetPrevious():
			done <- l.streamAttemptLogs(ctx)
		case m.GetFollow():
			done <- l.follow(ctx)
		default:
			done <- l.once(ctx)
		}
		close(l.out)
	}()
	var batch []*kilnv1.LogLine
	for {
		line, ok := <-l.out
		if ok {
			batch = append(batch, line)
		drain:
			for len(batch) < logBatch {
				select {
				case more, open := <-l.out:
					if !open {
						ok = false
						break drain
					}
					batch = append(batch, more)
				default:
					break drain
				}
			}
		}
		if len(batch) > 0 {
			if err := stream.Send(&kilnv1.StreamLogsResponse{Lines: batch}); err != nil {
				return err
			}
			batch = nil
		}
		if !ok {
			return <-done
		}
	}
}

type logStreamer struct {
	s    *TrainJobs
	req  *kilnv1.StreamLogsRequest
	tj   *trainer.TrainJob
	out  chan *kilnv1.LogLine
	what string
}

func (l *logStreamer) podSelector() client.ListOption {
	return client.MatchingLabelsSelector{Selector: labels.SelectorFromSet(labels.Set{jobsetv1alpha2.JobSetNameKey: l.tj.Name})}
}

// steps returns the newest pod of each step, in step order, keeping only the asked one.
func (l *logStreamer) steps(pods []corev1.Pod) ([]stepPod, []string) {
	var all []stepPod
	var names []string
	for _, st := range view.Steps(pods) {
		names = append(names, st.Name)
		if want := l.req.GetStep(); want != "" && st.Name != want && st.KubeflowName != want {
			continue
		}
		for i := range pods {
			if pods[i].Name == st.Pod {
				all = append(all, stepPod{step: st.Name, pod: &pods[i]})
			}
		}
	}
	return all, names
}

type stepPod struct {
	step string
	pod  *corev1.Pod
}

// once streams what each step printed so far, step after step.
func (l *logStreamer) once(ctx context.Context) error {
	pods := &corev1.PodList{}
	if err := l.s.kube.AsCaller.List(ctx, pods, client.InNamespace(l.tj.Namespace), l.podSelector()); err != nil {
		return toConnect(l.what, err)
	}
	steps, names := l.steps(pods.Items)
	if len(steps) == 0 {
		if l.req.GetStep() != "" {
			return connect.NewError(connect.CodeNotFound, fmt.Errorf("%s: no step %q: its steps are %s", l.what, l.req.GetStep(), listOrNone(names)))
		}
		return nil
	}
	for _, sp := range steps {
		if sp.pod.Status.Phase == corev1.PodPending {
			continue
		}
		if err := l.copy(ctx, sp, false); err != nil {
			return err
		}
	}
	return nil
}

// follow streams every step as it runs, starting the streams of steps as they start, until
// the job finished and every stream ended.
func (l *logStreamer) follow(ctx context.Context) error {
	watchPods := func() (watch.Interface, error) {
		// Without a resource version the watch starts with every existing pod (ADDED).
		pw, err := l.s.kube.CoreAsCaller.CoreV1().Pods(l.tj.Namespace).Watch(ctx, metav1.ListOptions{
			LabelSelector: labels.SelectorFromSet(labels.Set{jobsetv1alpha2.JobSetNameKey: l.tj.Name}).String(),
		})
		if err != nil {
			return nil, toConnect(l.what, err)
		}
		return pw, nil
	}
	pw, err := watchPods()
	if err != nil {
		return err
	}
	defer func() { pw.Stop() }()
	var wg sync.WaitGroup
	ctx, cancelAll := context.WithCancel(ctx)
	// Every stream has stopped writing before out is closed.
	defer func() { cancelAll(); wg.Wait() }()
	var (
		mu      sync.Mutex
		streams = map[types.UID]context.CancelFunc{}
		errc    = make(chan error, 1)
		pods    = map[types.UID]*corev1.Pod{}
	)
	start := func(sp stepPod, follow bool) {
		sctx, cancel := context.WithCancel(ctx)
		mu.Lock()
		streams[sp.pod.UID] = cancel
		mu.Unlock()
		wg.Go(func() {
			defer cancel()
			if err := l.copy(sctx, sp, follow); err != nil && sctx.Err() == nil {
				select {
				case errc <- err:
				default:
				}
			}
		})
	}
	poll := time.NewTicker(jobPollInterval)
	defer poll.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-l.s.stopping():
			return errShuttingDown
		case err := <-errc:
			return err
		case ev, ok := <-pw.ResultChan():
			if !ok {
				// The pod watch ended (Kubernetes closes watches now and then): go on
				// with another; pods already streamed are known by UID.
				if pw, err = watchPods(); err != nil {
					return err
				}
				continue
			}
			pod, isPod := ev.Object.(*corev1.Pod)
			if !isPod {
				continue
			}
			if ev.Type == watch.Deleted {
				delete(pods, pod.UID)
				continue
			}
			pods[pod.UID] = pod
			mu.Lock()
			cancel, streaming := streams[pod.UID]
			mu.Unlock()
			terminal := pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed
			switch {
			case !streaming && (pod.Status.Phase == corev1.PodRunning || terminal):
				list := make([]corev1.Pod, 0, len(pods))
				for _, p := range pods {
					list = append(list, *p)
				}
				steps, _ := l.steps(list)
				for _, sp := range steps {
					if sp.pod.UID == pod.UID {
						start(sp, !terminal)
					}
				}
			case streaming && terminal:
				time.AfterFunc(terminatedLogGrace, cancel)
			}
		case <-poll.C:
			tj := &trainer.TrainJob{}
			if err := l.s.kube.Cache.Get(ctx, client.ObjectKeyFromObject(l.tj), tj); err != nil && !apierrors.IsNotFound(err) {
				continue
			} else if err != nil || finished(tj) {
				// Finished (or deleted): the streams deliver what is left, then end.
				mu.Lock()
				for _, cancel := range streams {
					time.AfterFunc(terminatedLogGrace, cancel)
				}
				mu.Unlock()
				wg.Wait()
				return nil
			}
		}
	}
}

func finished(tj *trainer.TrainJob) bool {
	st, _, _ := view.State(tj, nil)
	return st == kilnv1.State_STATE_COMPLETE || st == kilnv1.State_STATE_FAILED
}

// copy streams one pod's log to out.
func (l *logStreamer) copy(ctx context.Context, sp stepPod, follow bool) error {
	container := l.req.GetContainer()
	if container == "" {
		container = trainer.MainContainer(sp.pod)
	}
	opts := &corev1.PodLogOptions{Container: container, Follow: follow, Timestamps: l.req.GetTimestamps(), TailLines: l.req.TailLines, SinceSeconds: l.req.SinceSeconds}
	rc, err := l.s.kube.CoreAsCaller.CoreV1().Pods(sp.pod.Namespace).GetLogs(sp.pod.Name, opts).Stream(ctx)
	if err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return toConnect(fmt.Sprintf("%s: step %s (pod %s)", l.what, sp.step, sp.pod.Name), err)
	}
	defer rc.Close()
	r := bufio.NewReaderSize(rc, 64<<10)
	for {
		text, err := r.ReadString('\n')
		if text != "" {
			line := &kilnv1.LogLine{Step: sp.step, Pod: sp.pod.Name, Container: container, Text: strings.TrimSuffix(text, "\n"), Attempt: int32(kiln.AttemptOf(sp.pod.Labels))}
			if l.req.GetTimestamps() {
				if ts, rest, ok := strings.Cut(line.Text, " "); ok {
					if t, perr := time.Parse(time.RFC3339Nano, ts); perr == nil {
						line.Time, line.Text = timestamppb.New(t), rest
					}
				}
			}
			select {
			case l.out <- line:
			case <-ctx.Done():
				return nil
			}
		}
		if errors.Is(err, io.EOF) || ctx.Err() != nil {
			return nil
		}
		if err != nil {
			return toConnect(fmt.Sprintf("%s: step %s", l.what, sp.step), err)
		}
	}
}

func listOrNone(names []string) string {
	if len(names) == 0 {
		return "none yet (the job has not started)"
	}
	slices.Sort(names)
	return strings.Join(names, ", ")
}

// dispatchedElsewhere is the error for the logs of a job that MultiKueue runs on a worker
// cluster: its pods are there, which this server does not reach. Nil for other jobs.
func (s *TrainJobs) dispatchedElsewhere(ctx context.Context, tj *trainer.TrainJob) error {
	if ptr.Deref(tj.Spec.ManagedBy, "") != trainer.MultiKueueControllerName {
		return nil
	}
	where := "a worker cluster, once MultiKueue dispatches it (it has not yet)"
	if s.kube.Kueue() {
		if wl := s.views.workload(ctx, tj); wl != nil && wl.Cluster != "" {
			where = "worker cluster " + wl.Cluster
		}
	}
	return connect.NewError(connect.CodeFailedPrecondition, fmt.Errorf(
		"TrainJob %s/%s runs on %s (spec.managedBy %s): its pods and their logs are there, not on this cluster. "+
			"Read them on that cluster: kubectl -n %s logs -l %s=%s --all-containers (or kiln logs against a Kiln API server of that cluster; docs/multicluster.md)",
		tj.Namespace, tj.Name, where, trainer.MultiKueueControllerName, tj.Namespace, jobsetv1alpha2.JobSetNameKey, tj.Name))
}
