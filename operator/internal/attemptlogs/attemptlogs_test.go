package attemptlogs

import (
	"context"
	"fmt"
	goruntime "runtime"
	"strconv"
	"strings"
	"testing"
	"testing/iotest"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	kubefake "k8s.io/client-go/kubernetes/fake"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"

	kiln "github.com/kiln-ml/kiln/api/kiln/v1alpha1"
	kilntesting "github.com/kiln-ml/kiln/api/testing"
	trainer "github.com/kiln-ml/kiln/api/trainer/v1alpha1"
)

var now = time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)

// deletedPod is node-<index> of attempt of job "mnist", deleted at now minus age, its
// container in state.
func deletedPod(attempt, index int, age time.Duration, state corev1.ContainerState) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name: fmt.Sprintf("mnist-node-0-%d-a%d", index, attempt), Namespace: "ns",
			Labels: map[string]string{
				jobsetv1alpha2.JobSetNameKey: "mnist", jobsetv1alpha2.ReplicatedJobNameKey: "node", jobsetv1alpha2.JobIndexKey: "0",
				trainer.LabelJobCompletionIndex: strconv.Itoa(index), kiln.LabelJobSetRestartAttempt: strconv.Itoa(attempt), kiln.LabelKeepLogs: "true",
			},
			Finalizers:                 []string{kiln.FinalizerAttemptLogs},
			DeletionTimestamp:          ptr.To(metav1.NewTime(now.Add(-age))),
			DeletionGracePeriodSeconds: ptr.To[int64](30),
		},
		Spec:   corev1.PodSpec{NodeName: "node-a", Containers: []corev1.Container{{Name: "node"}}},
		Status: corev1.PodStatus{Phase: corev1.PodRunning, ContainerStatuses: []corev1.ContainerStatus{{Name: "node", State: state}}},
	}
}

var (
	stopped    = corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 143, Reason: "Error"}}
	stillGoing = corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}
	neverRan   = corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "ContainerCreating"}}
)

func setup(t *testing.T, objs ...client.Object) (*Reconciler, client.Client) {
	t.Helper()
	scheme := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{corev1.AddToScheme, trainer.AddToScheme} {
		if err := add(scheme); err != nil {
			t.Fatal(err)
		}
	}
	c := fake.NewClientBuilder().WithScheme(scheme).WithObjects(objs...).Build()
	// The fake clientset answers every log read with "fake logs".
	return NewReconciler(c, c, kubefake.NewClientset(), clocktesting.NewFakePassiveClock(now)), c
}

func keptLogs(t *testing.T, c client.Client) map[string]string {
	t.Helper()
	list := &corev1.ConfigMapList{}
	if err := c.List(context.Background(), list, client.InNamespace("ns"), client.MatchingLabels{kiln.LabelAttemptLogsOf: "mnist"}); err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for i := range list.Items {
		log, err := kiln.DecodeAttemptLog(&list.Items[i])
		if err != nil {
			t.Fatal(err)
		}
		out[list.Items[i].Name] = fmt.Sprintf("attempt %d of %s/%s: %s", log.Attempt, log.Pod, log.Container, log.Text)
	}
	return out
}

func TestReadTailKeepsTheEnd(t *testing.T) {
	var in strings.Builder
	for i := range 200_000 {
		fmt.Fprintf(&in, "line %d\n", i)
	}
	got, err := readTail(strings.NewReader(in.String()), 1000)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) < 1000 || len(got) > 2000 || !strings.HasSuffix(string(got), "line 199999\n") {
		t.Errorf("kept %d bytes ending %q", len(got), got[max(0, len(got)-20):])
	}
	// Read a byte at a time, the bound holds too, and a log shorter than the bound is kept whole.
	got, err = readTail(iotest.OneByteReader(strings.NewReader(in.String())), 1000)
	if err != nil || len(got) < 1000 || len(got) > 2000 || !strings.HasSuffix(string(got), "line 199999\n") {
		t.Errorf("one byte at a time: kept %d bytes (%v)", len(got), err)
	}
	short := strings.Repeat("x", 5000) + "\n"
	if got, err := readTail(strings.NewReader(short), 1<<20); err != nil || string(got) != short {
		t.Errorf("a short log: kept %d of %d bytes (%v)", len(got), len(short), err)
	}
}

// A short log costs a small buffer: a thousand pods deleted at once read their logs together.
func TestReadTailOfAShortLogAllocatesLittle(t *testing.T) {
	line := "training step 1\n"
	var ms0, ms1 goruntime.MemStats
	goruntime.ReadMemStats(&ms0)
	for range 100 {
		if _, err := readTail(strings.NewReader(line), 4<<20); err != nil {
			t.Fatal(err)
		}
	}
	goruntime.ReadMemStats(&ms1)
	if per := (ms1.TotalAlloc - ms0.TotalAlloc) / 100; per > 8<<10 {
		t.Errorf("reading a %d-byte log allocated %d bytes", len(line), per)
	}
}

func TestReconcile(t *testing.T) {
	job := kilntesting.MakeTrainJob("mnist", "ns").UID("uid-1").Obj()
	cases := map[string]struct {
		pod          *corev1.Pod
		job          *trainer.TrainJob
		wantRequeue  bool
		wantReleased bool
		wantKept     map[string]string
	}{
		"stopped: its log is kept, then it goes": {
			pod: deletedPod(1, 0, 5*time.Second, stopped), job: job, wantReleased: true,
			wantKept: map[string]string{"mnist-node-0-0-a1-logs": "attempt 1 of mnist-node-0-0-a1/node: fake logs"},
		},
		// Its log is followed to the container's end (the fake's stream ends at once), then kept.
		"still stopping: its log followed to the end, then kept; looked at again meanwhile": {
			pod: deletedPod(1, 0, 5*time.Second, stillGoing), job: job, wantRequeue: true, wantReleased: true,
			wantKept: map[string]string{"mnist-node-0-0-a1-logs": "attempt 1 of mnist-node-0-0-a1/node: fake logs"},
		},
		"still running past its grace period: given up, it goes": {
			pod: deletedPod(1, 0, HoldAfterGrace+time.Second, stillGoing), job: job, wantReleased: true, wantKept: map[string]string{},
		},
		"never ran: nothing to keep, it goes": {
			pod: deletedPod(1, 0, time.Second, neverRan), job: job, wantReleased: true, wantKept: map[string]string{},
		},
		"its TrainJob is being deleted: nothing kept, it goes": {
			pod: deletedPod(1, 0, 5*time.Second, stopped), wantReleased: true, wantKept: map[string]string{},
			job: kilntesting.MakeTrainJob("mnist", "ns").UID("uid-1").Obj(),
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			objs := []client.Object{tc.pod}
			if tc.job != nil {
				j := tc.job.DeepCopy()
				if name == "its TrainJob is being deleted: nothing kept, it goes" {
					j.Finalizers = []string{"test/hold"}
					j.DeletionTimestamp = ptr.To(metav1.NewTime(now))
				}
				objs = append(objs, j)
			}
			r, c := setup(t, objs...)
			res, err := r.Reconcile(context.Background(), reconcileRequest(tc.pod))
			if err != nil {
				t.Fatal(err)
			}
			if got := res.RequeueAfter > 0; got != tc.wantRequeue {
				t.Errorf("requeue after %v, want a requeue: %v", res.RequeueAfter, tc.wantRequeue)
			}
			// A followed log is kept by its own goroutine: wait for it to finish.
			r.followers.Wait()
			pod := &corev1.Pod{}
			err = c.Get(context.Background(), client.ObjectKeyFromObject(tc.pod), pod)
			released := err != nil || len(pod.Finalizers) == 0
			if released != tc.wantReleased {
				t.Errorf("released = %v, want %v", released, tc.wantReleased)
			}
			if got := keptLogs(t, c); fmt.Sprint(got) != fmt.Sprint(tc.wantKept) {
				t.Errorf("kept %v, want %v", got, tc.wantKept)
			}
		})
	}
}

// A job restarted again and again keeps the newest kiln.AttemptsKept attempts' logs.
func TestPruneKeepsTheNewestAttempts(t *testing.T) {
	job := kilntesting.MakeTrainJob("mnist", "ns").UID("uid-1").Obj()
	r, c := setup(t, job)
	for attempt := range kiln.AttemptsKept + 3 {
		pod := deletedPod(attempt, 0, 5*time.Second, stopped)
		// Created, then deleted: the finalizer holds it, as the apiserver would.
		if err := c.Create(context.Background(), pod); err != nil {
			t.Fatal(err)
		}
		if err := c.Delete(context.Background(), pod); err != nil {
			t.Fatal(err)
		}
		if _, err := r.Reconcile(context.Background(), reconcileRequest(pod)); err != nil {
			t.Fatal(err)
		}
	}
	kept := keptLogs(t, c)
	if len(kept) != kiln.AttemptsKept {
		t.Fatalf("kept %d attempts' logs, want %d: %v", len(kept), kiln.AttemptsKept, kept)
	}
	for attempt := 3; attempt < kiln.AttemptsKept+3; attempt++ {
		if _, ok := kept[kiln.AttemptLogName(fmt.Sprintf("mnist-node-0-0-a%d", attempt))]; !ok {
			t.Errorf("attempt %d's log is gone: %v", attempt, kept)
		}
	}
}

func reconcileRequest(pod *corev1.Pod) ctrl.Request {
	return ctrl.Request{NamespacedName: client.ObjectKeyFromObject(pod)}
}

// The chart's pre-delete hook lets every held pod go: none waits on a removed operator.
func TestReleaseAll(t *testing.T) {
	held := deletedPod(0, 0, time.Second, stillGoing)
	running := deletedPod(0, 1, 0, stillGoing)
	running.DeletionTimestamp, running.DeletionGracePeriodSeconds = nil, nil
	_, c := setup(t, held, running)
	n, err := ReleaseAll(context.Background(), c)
	if err != nil {
		t.Fatal(err)
	}
	if n != 2 {
		t.Errorf("released %d pods, want 2", n)
	}
	pod := &corev1.Pod{}
	if err := c.Get(context.Background(), client.ObjectKeyFromObject(running), pod); err != nil || len(pod.Finalizers) != 0 {
		t.Errorf("the running pod kept %v (%v)", pod.Finalizers, err)
	}
}
