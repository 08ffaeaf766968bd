// Package attemptlogs keeps the last words of a TrainJob's pods that are deleted: a group
// restart, a preemption, a suspension or the deadline deletes them, and with them their
// logs, the SIGTERM and emergency-checkpoint lines a user most needs. Every pod of a job
// carries kiln.FinalizerAttemptLogs (render.KeepAttemptLogs); when one is deleted, the
// Reconciler reads its main container's log, following it to the container's end when it still
// runs (the kubelet removes a deleted pod's containers as soon as they stop), copies its tail
// into a ConfigMap owned by the TrainJob, keeps the newest kiln.AttemptsKept attempts, and
// removes the finalizer. A pod is never held longer than its grace period and HoldAfterGrace: a log
// that cannot be read is given up, not waited for.
package attemptlogs

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"

	kiln "github.com/kiln-ml/kiln/api/kiln/v1alpha1"
	trainer "github.com/kiln-ml/kiln/api/trainer/v1alpha1"
)

// +kubebuilder:rbac:groups="",resources=pods,verbs=get;list;watch;patch;update
// +kubebuilder:rbac:groups="",resources=pods/log,verbs=get
// +kubebuilder:rbac:groups="",resources=configmaps,verbs=get;list;create;delete

// HoldAfterGrace is how long past its grace period (its deletionTimestamp) a deleted pod is
// held for its log: a kubelet that never reports its containers stopped (a node gone) does
// not hold a restart.
const HoldAfterGrace = 30 * time.Second

// maxLogRead bounds what is read of a log to keep its tail: the kept MiB and some.
const maxLogRead = 4 * kiln.AttemptLogBytes

// Reconciler keeps the logs of a TrainJob's deleted pods.
type Reconciler struct {
	client client.Client
	// live reads the ConfigMaps of a job's kept logs, which the cache does not hold.
	live  client.Reader
	logs  kubernetes.Interface
	clock clock.PassiveClock
	// followed are the deleted pods whose running containers' logs are being followed to
	// their end, by UID: a kubelet removes a deleted pod's containers as soon as they stop,
	// so their last lines are read as they are written, not after.
	mu       sync.Mutex
	followed map[types.UID]*follower
	// followers counts the follows under way (tests wait for them).
	followers sync.WaitGroup
}

// NewReconciler keeps logs with c (the manager's client), live (past the cache) and the
// clientset logs are read with.
func NewReconciler(c client.Client, live client.Reader, logs kubernetes.Interface, clk clock.PassiveClock) *Reconciler {
	return &Reconciler{client: c, live: live, logs: logs, clock: clk}
}

// SetupWithManager watches the pods that carry the finalizer and are being deleted.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).
		Named("attemptlogs").
		For(&corev1.Pod{}, builder.WithPredicates(held{})).
		Complete(r)
}

// held passes the pods this controller has work on: deleted, and still holding its finalizer.
type held struct{ predicate.Funcs }

func (held) Create(e event.CreateEvent) bool { return isHeld(e.Object) }
func (held) Update(e event.UpdateEvent) bool { return isHeld(e.ObjectNew) }
func (held) Delete(event.DeleteEvent) bool   { return false }

func isHeld(o client.Object) bool {
	return o.GetDeletionTimestamp() != nil && controllerutil.ContainsFinalizer(o, kiln.FinalizerAttemptLogs)
}

// Reconcile keeps the log of one deleted pod, then lets it go.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	pod := &corev1.Pod{}
	if err := r.client.Get(ctx, req.NamespacedName, pod); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	return r.reconcile(ctx, pod)
}

func (r *Reconciler) reconcile(ctx context.Context, pod *corev1.Pod) (ctrl.Result, error) {
	if !isHeld(pod) {
		return ctrl.Result{}, nil
	}
	logger := log.FromContext(ctx).WithValues("pod", klog.KObj(pod))
	// A graceful deletion's timestamp is when its grace period ends.
	giveUp := pod.DeletionTimestamp.Add(HoldAfterGrace)
	if running(pod) || r.following(pod.UID) {
		if !running(pod) {
			// Its containers stopped: the follow has what they wrote, once the stream
			// delivered its last bytes (some log sources never end a followed stream).
			r.stopFollowing(pod.UID, stopGrace)
		}
		if wait := giveUp.Sub(r.clock.Now()); wait > 0 {
			// The kubelet is stopping its containers: their last lines are still to come,
			// and are read as they come (follow), then kept.
			r.follow(logger, pod.DeepCopy(), wait)
			return ctrl.Result{RequeueAfter: min(wait, 5*time.Second)}, nil
		}
		logger.Info("Giving up a deleted pod's log: its containers did not stop in time")
		return ctrl.Result{}, r.release(ctx, pod)
	}
	if err := r.keep(ctx, pod); err != nil {
		// A log that cannot be kept is lost, as it was before Kiln kept any: the pod goes.
		logger.Info("Could not keep a deleted pod's log", "err", err.Error())
	}
	return ctrl.Result{}, r.release(ctx, pod)
}

// running says whether any container of a scheduled pod may still write to its log.
func running(pod *corev1.Pod) bool {
	if pod.Spec.NodeName == "" || pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed {
		return false
	}
	for _, cs := range slices.Concat(pod.Status.InitContainerStatuses, pod.Status.ContainerStatuses) {
		if cs.State.Running != nil {
			return true
		}
	}
	return false
}

// follow reads, once per pod, its main container's log to its end (the container stops)
// or for at most wait, then keeps what it read and lets the pod go.
func (r *Reconciler) follow(logger logr.Logger, pod *corev1.Pod, wait time.Duration) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.followed[pod.UID] != nil {
		return
	}
	if r.followed == nil {
		r.followed = map[types.UID]*follower{}
	}
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	r.followed[pod.UID] = &follower{cancel: cancel}
	r.followers.Add(1)
	go func() {
		defer r.followers.Done()
		defer func() {
			r.mu.Lock()
			delete(r.followed, pod.UID)
			r.mu.Unlock()
		}()
		defer cancel()
		if err := r.keepWith(ctx, pod, true); err != nil {
			logger.Info("Could not keep a deleted pod's log", "err", err.Error())
		}
		// The pod changed while its containers stopped: let go of it as it is now.
		rctx, rcancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer rcancel()
		now := &corev1.Pod{}
		if err := r.client.Get(rctx, client.ObjectKeyFromObject(pod), now); err != nil {
			return // gone already, or the next reconcile lets it go
		}
		if err := r.release(rctx, now); err != nil {
			logger.Info("Could not release a deleted pod", "err", err.Error())
		}
	}()
}

// follower is a follow under way.
type follower struct {
	cancel  context.CancelFunc
	stopped bool
}

// stopGrace is how long a follow goes on after the pod's containers stopped: the last bytes
// of a stream arrive after the status that says they stopped.
const stopGrace = 2 * time.Second

// following says whether the pod's log is being followed.
func (r *Reconciler) following(uid types.UID) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.followed[uid] != nil
}

// stopFollowing ends the pod's follow after grace, once.
func (r *Reconciler) stopFollowing(uid types.UID, grace time.Duration) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if f := r.followed[uid]; f != nil && !f.stopped {
		f.stopped = true
		time.AfterFunc(grace, f.cancel)
	}
}

// keep copies the tail of the stopped pod's main container's log into its attempt-logs
// ConfigMap, owned by the pod's TrainJob, and prunes the job's older attempts.
func (r *Reconciler) keep(ctx context.Context, pod *corev1.Pod) error {
	return r.keepWith(ctx, pod, false)
}

// keepWith keeps the pod's log, read at once or (follow) to the container's end.
func (r *Reconciler) keepWith(ctx context.Context, pod *corev1.Pod, follow bool) error {
	jobName := pod.Labels[jobsetv1alpha2.JobSetNameKey]
	tj := &trainer.TrainJob{}
	if err := r.client.Get(ctx, client.ObjectKey{Namespace: pod.Namespace, Name: jobName}, tj); err != nil {
		return fmt.Errorf("reading TrainJob %s: %w", jobName, err)
	}
	if tj.DeletionTimestamp != nil {
		return nil // everything of the job goes with it
	}
	container := trainer.MainContainer(pod)
	if container == "" || (!follow && !started(pod, container)) {
		return nil // it never ran: nothing to keep
	}
	text, err := r.read(ctx, pod, container, follow)
	if err != nil && len(text) == 0 {
		return err
	}
	// What was read before a deadline or a broken stream is kept all the same.
	data, truncated, err := kiln.EncodeAttemptLog(text)
	if err != nil {
		return err
	}
	attempt := kiln.AttemptOf(pod.Labels)
	jobIndex, _ := strconv.Atoi(pod.Labels[jobsetv1alpha2.JobIndexKey])
	index, _ := strconv.Atoi(pod.Labels[trainer.LabelJobCompletionIndex])
	rj := pod.Labels[jobsetv1alpha2.ReplicatedJobNameKey]
	cm := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{
			Name:      kiln.AttemptLogName(pod.Name),
			Namespace: tj.Namespace,
			Labels: map[string]string{
				kiln.LabelAttemptLogsOf:             tj.Name,
				kiln.LabelAttempt:                   strconv.Itoa(attempt),
				jobsetv1alpha2.ReplicatedJobNameKey: rj,
				jobsetv1alpha2.JobIndexKey:          strconv.Itoa(jobIndex),
				trainer.LabelJobCompletionIndex:     strconv.Itoa(index),
			},
			Annotations: map[string]string{
				kiln.AnnotationLogPod:        pod.Name,
				kiln.AnnotationLogContainer:  container,
				kiln.AnnotationLogCapturedAt: r.clock.Now().UTC().Format(time.RFC3339),
				kiln.AnnotationLogTruncated:  strconv.FormatBool(truncated),
			},
			OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(tj, trainer.GroupVersion.WithKind(trainer.TrainJobKind))},
		},
		BinaryData: map[string][]byte{kiln.AttemptLogKey: data},
	}
	// A context past its deadline (the follow's) must not lose what was read.
	wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	if err := r.client.Create(wctx, cm); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("keeping the log of pod %s: %w", pod.Name, err)
	}
	return r.prune(wctx, tj, attempt)
}

// read reads the tail of a container's log, its last kiln.AttemptLogBytes and some; with
// follow, on to the end of the container, keeping the tail as it goes. What was read is
// returned with any error.
func (r *Reconciler) read(ctx context.Context, pod *corev1.Pod, container string, follow bool) ([]byte, error) {
	// The API reads logs from the start (limitBytes) or by lines (tailLines): enough lines
	// for the kept bytes at any sane line length.
	req := r.logs.CoreV1().Pods(pod.Namespace).GetLogs(pod.Name, &corev1.PodLogOptions{
		Container: container, TailLines: ptr.To[int64](kiln.AttemptLogBytes / 16), Follow: follow,
	})
	stream, err := req.Stream(ctx)
	if err != nil {
		return nil, fmt.Errorf("reading the log of pod %s: %w", pod.Name, err)
	}
	defer func() { _ = stream.Close() }()
	text, err := readTail(stream, maxLogRead)
	if err != nil {
		return text, fmt.Errorf("reading the log of pod %s: %w", pod.Name, err)
	}
	return text, nil
}

// readTail reads r to its end, keeping at most the last keep bytes (and at times up to
// twice that, to copy seldom). Its buffer starts small and grows with what is read: most
// logs are short, and when a thousand deadlines fall due together a thousand pods' logs are
// read at once (docs/performance.md, "A kept log's buffer grows with the log").
func readTail(r io.Reader, keep int) ([]byte, error) {
	buf := make([]byte, 0, min(readTailStart, 2*keep))
	for {
		if len(buf) == cap(buf) {
			if len(buf) >= 2*keep {
				buf = append(make([]byte, 0, 2*keep), buf[len(buf)-keep:]...)
			} else {
				buf = slices.Grow(buf, min(len(buf), 2*keep-len(buf)))
			}
		}
		n, err := r.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		if errors.Is(err, io.EOF) {
			return buf, nil
		}
		if err != nil {
			return buf, err
		}
	}
}

// readTailStart is the size readTail's buffer starts at.
const readTailStart = 4 << 10

// prune deletes the kept logs of the job's attempts older than the newest kiln.AttemptsKept
// (an attempt is JobSet's restart attempt; Kiln's own restart of a stalled job keeps it).
func (r *Reconciler) prune(ctx context.Context, tj *trainer.TrainJob, newest int) error {
	if newest < kiln.AttemptsKept {
		return nil
	}
	list := &corev1.ConfigMapList{}
	sel := labels.SelectorFromSet(labels.Set{kiln.LabelAttemptLogsOf: tj.Name})
	if err := r.live.List(ctx, list, client.InNamespace(tj.Namespace), client.MatchingLabelsSelector{Selector: sel}); err != nil {
		return fmt.Errorf("listing the kept logs of TrainJob %s: %w", tj.Name, err)
	}
	for i := range list.Items {
		cm := &list.Items[i]
		// A namesake's left behind is not ours to delete; the newest attempts are kept.
		if !metav1.IsControlledBy(cm, tj) || kiln.AttemptOf(cm.Labels) > newest-kiln.AttemptsKept {
			continue
		}
		if err := r.client.Delete(ctx, cm); client.IgnoreNotFound(err) != nil {
			return fmt.Errorf("deleting the kept log %s: %w", cm.Name, err)
		}
	}
	return nil
}

// release removes the finalizer: the pod may go.
func (r *Reconciler) release(ctx context.Context, pod *corev1.Pod) error {
	patch := client.MergeFromWithOptions(pod.DeepCopy(), client.MergeFromWithOptimisticLock{})
	controllerutil.RemoveFinalizer(pod, kiln.FinalizerAttemptLogs)
	if err := r.client.Patch(ctx, pod, patch); client.IgnoreNotFound(err) != nil {
		return fmt.Errorf("releasing pod %s: %w", pod.Name, err)
	}
	return nil
}

// started says whether the container ever ran (a pod deleted while pending has no log).
func started(pod *corev1.Pod, container string) bool {
	for _, cs := range pod.Status.ContainerStatuses {
		if cs.Name == container {
			return cs.State.Terminated != nil || cs.State.Running != nil || cs.LastTerminationState.Terminated != nil
		}
	}
	return false
}

// ReleaseAll removes the finalizer from every pod that carries it, in every namespace: the
// Helm chart's pre-delete hook, so that no pod waits on an operator that is being removed.
// It returns how many pods it released.
func ReleaseAll(ctx context.Context, c client.Client) (int, error) {
	pods := &corev1.PodList{}
	if err := c.List(ctx, pods, client.MatchingLabels{kiln.LabelKeepLogs: "true"}); err != nil {
		return 0, fmt.Errorf("listing the pods whose logs Kiln keeps: %w", err)
	}
	released := 0
	for i := range pods.Items {
		pod := &pods.Items[i]
		if !controllerutil.ContainsFinalizer(pod, kiln.FinalizerAttemptLogs) {
			continue
		}
		r := &Reconciler{client: c}
		if err := r.release(ctx, pod); err != nil {
			return released, err
		}
		released++
	}
	return released, nil
}
