package platform

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	authnv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"

	kiln "github.com/kiln-ml/kiln/api/kiln/v1alpha1"
	trainer "github.com/kiln-ml/kiln/api/trainer/v1alpha1"
)

func rankZero(mutate func(*corev1.Pod)) *corev1.Pod {
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: "job-node-0-0-abc", UID: "uid-1",
			Labels:      map[string]string{jobsetv1alpha2.JobIndexKey: "0", jobsetv1alpha2.JobSetNameKey: "job"},
			Annotations: map[string]string{"batch.kubernetes.io/job-completion-index": "0", AnnotationSimDuration: "1s"}},
		Spec:   corev1.PodSpec{NodeName: "kwok-gpu-0", Containers: []corev1.Container{{Name: "node", Env: []corev1.EnvVar{{Name: trainer.EnvStatusServerURL, Value: "https://x"}}}}},
		Status: corev1.PodStatus{Phase: corev1.PodRunning},
	}
	if mutate != nil {
		mutate(p)
	}
	return p
}

func TestSimulatedRankZero(t *testing.T) {
	for name, tc := range map[string]struct {
		mutate func(*corev1.Pod)
		want   bool
	}{
		"rank 0 of a trainer, running":   {want: true},
		"not running yet":                {mutate: func(p *corev1.Pod) { p.Status.Phase = corev1.PodPending }},
		"another job of the jobset":      {mutate: func(p *corev1.Pod) { p.Labels[jobsetv1alpha2.JobIndexKey] = "1" }},
		"another index of the job":       {mutate: func(p *corev1.Pod) { p.Annotations["batch.kubernetes.io/job-completion-index"] = "1" }},
		"opted out":                      {mutate: func(p *corev1.Pod) { p.Annotations[AnnotationSimProgress] = "off" }},
		"no status server (initializer)": {mutate: func(p *corev1.Pod) { p.Spec.Containers[0].Env = nil }},
		"being deleted":                  {mutate: func(p *corev1.Pod) { p.DeletionTimestamp = &metav1.Time{Time: time.Now()} }},
	} {
		t.Run(name, func(t *testing.T) {
			if got := simulatedRankZero(rankZero(tc.mutate)); got != tc.want {
				t.Errorf("simulatedRankZero = %v, want %v", got, tc.want)
			}
		})
	}
}

// statusServer records the reports it is sent and answers with code from the reply-th on.
type statusServer struct {
	mu      sync.Mutex
	reports []trainer.TrainerStatus
	tokens  []string
	reply   int
	code    int
}

func (s *statusServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var req trainer.UpdateTrainJobStatusRequest
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	s.tokens = append(s.tokens, r.Header.Get("Authorization"))
	s.reports = append(s.reports, *req.TrainerStatus)
	if s.code != 0 && len(s.reports) >= s.reply {
		w.WriteHeader(s.code)
		return
	}
	w.WriteHeader(http.StatusOK)
}

func newSimTrainer(t *testing.T, srv *statusServer) (*simTrainer, *[]*authnv1.TokenRequest) {
	t.Helper()
	hs := httptest.NewServer(srv)
	t.Cleanup(hs.Close)
	var asked []*authnv1.TokenRequest
	return &simTrainer{
		token: func(_ context.Context, ns, sa string, tr *authnv1.TokenRequest) (*authnv1.TokenRequest, error) {
			asked = append(asked, tr)
			tr.Status.Token = "token-of-" + ns + "/" + sa
			return tr, nil
		},
		post:  hs.Client().Do,
		url:   func(ns, name string) string { return hs.URL + trainer.StatusPath(ns, name) },
		clock: time.Now, defaultDuration: 2 * time.Second, sem: make(chan struct{}, 1),
		logf: func(format string, args ...any) { t.Logf(format, args...) },
	}, &asked
}

// A simulated run reports every step, spread over the pod's duration, with the token of
// the pod's ServiceAccount bound to the pod for the job's audience: 100% at its last step,
// and a loss that falls.
func TestReportsEveryStepOfTheRun(t *testing.T) {
	srv := &statusServer{}
	s, asked := newSimTrainer(t, srv)
	start := time.Now()
	if err := s.report(t.Context(), rankZero(nil)); err != nil {
		t.Fatal(err)
	}
	if took := time.Since(start); took > 1500*time.Millisecond {
		t.Errorf("a run of 1 s took %s to report", took)
	}
	steps := simSteps(time.Second)
	if len(srv.reports) != steps {
		t.Fatalf("%d reports, want %d", len(srv.reports), steps)
	}
	var losses []float64
	for i, r := range srv.reports {
		step := map[string]string{}
		for _, m := range r.Metrics {
			step[m.Name] = m.Value
		}
		if step[kiln.MetricStep] != strconv.Itoa(i+1) || step[kiln.MetricTotalSteps] != strconv.Itoa(steps) {
			t.Errorf("report %d: step %s of %s, want %d of %d", i, step[kiln.MetricStep], step[kiln.MetricTotalSteps], i+1, steps)
		}
		loss, err := strconv.ParseFloat(step["loss"], 64)
		if err != nil {
			t.Fatal(err)
		}
		losses = append(losses, loss)
	}
	for i := 1; i < len(losses); i++ {
		if losses[i] >= losses[i-1] {
			t.Errorf("the loss rose at step %d: %v", i+1, losses)
		}
	}
	if last := srv.reports[steps-1]; *last.ProgressPercentage != 100 || *last.EstimatedRemainingSeconds != 0 {
		t.Errorf("the last report: %d%%, %d s left; want 100%%, 0", *last.ProgressPercentage, *last.EstimatedRemainingSeconds)
	}
	want := &authnv1.TokenRequestSpec{
		Audiences: []string{trainer.TokenAudience("team", "job")}, ExpirationSeconds: (*asked)[0].Spec.ExpirationSeconds,
		BoundObjectRef: &authnv1.BoundObjectReference{Kind: "Pod", APIVersion: "v1", Name: "job-node-0-0-abc", UID: "uid-1"},
	}
	if diff := cmp.Diff(want, &(*asked)[0].Spec); diff != "" {
		t.Errorf("token asked for (-want +got):\n%s", diff)
	}
	if srv.tokens[0] != "Bearer token-of-team/default" {
		t.Errorf("posted with %q, want the pod's ServiceAccount's token", srv.tokens[0])
	}
}

// When the status server says the pod may report no more (it is gone, its job finished),
// the reports stop.
func TestStopsWhenThePodMayReportNoMore(t *testing.T) {
	srv := &statusServer{reply: 2, code: http.StatusForbidden}
	s, _ := newSimTrainer(t, srv)
	if err := s.report(t.Context(), rankZero(nil)); err != nil {
		t.Fatal(err)
	}
	if len(srv.reports) != 2 {
		t.Errorf("%d reports, want 2: the reports go on after a 403", len(srv.reports))
	}
}

func TestSimSteps(t *testing.T) {
	for d, want := range map[time.Duration]int{0: 3, time.Second: 3, 2 * time.Second: 4, 5 * time.Second: 10, time.Hour: 20} {
		if got := simSteps(d); got != want {
			t.Errorf("simSteps(%s) = %d, want %d", d, got, want)
		}
	}
}
