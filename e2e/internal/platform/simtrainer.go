package platform

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"os"
	"strconv"
	"sync"
	"time"

	"golang.org/x/time/rate"
	authnv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"

	kiln "github.com/kiln-ml/kiln/api/kiln/v1alpha1"
	trainer "github.com/kiln-ml/kiln/api/trainer/v1alpha1"
)

// The simulated trainer: KWOK's pods run no code, so without it the jobs a newcomer runs
// after `make up` would never show progress. It reports for the rank 0 pod of each job's
// trainer on a KWOK node what a trainer using kiln.progress would (step, total steps, a
// falling loss) over the pod's simulated run, to the operator's status server, with a token
// the apiserver binds to that pod: the status server checks it as it checks a real
// trainer's. Only on the local platform (`make up`, Kiln as processes).
const (
	// AnnotationSimProgress "off" on a simulated pod keeps the simulated trainer from
	// reporting for it (a test that reports itself).
	AnnotationSimProgress = "sim.kiln.dev/progress"
	// EnvSimulatedProgress "0" starts no simulated trainer.
	EnvSimulatedProgress = "KILN_SIMULATED_PROGRESS"
)

// The simulation must not load the platform under a test that fills the fleet: at most
// simReporters pods are reported for at once (pods past it stay silent), and reports for
// at most simStartsPerSecond new pods start each second (a burst of pods waits its turn).
const (
	simReporters       = 64
	simStartsPerSecond = 8
)

// SimTrainerProcess is the simulated trainer, `kiln-platform sim-trainer`.
func (c Config) SimTrainerProcess() Process {
	return Process{
		Name: "kiln-sim-trainer", Path: c.Bin("kiln-platform"), RunDir: c.RunDir(), LogsDir: c.LogsDir(),
		Args: []string{"--root", c.Root, "sim-trainer"},
	}
}

// runsSimTrainer says whether this platform runs the simulated trainer.
func (c Config) runsSimTrainer() bool {
	return c.SimulatedProgress && c.Install == InstallProcesses && c.Trainer == TrainerKiln && !c.IsWorker() && c.Workers == 0
}

// simTrainerUp starts the simulated trainer unless it runs.
func (p *Platform) simTrainerUp() error {
	proc := p.SimTrainerProcess()
	if pid, running := proc.Running(); running {
		p.logf("simulated trainer: already running (pid %d)", pid)
		return nil
	}
	if err := proc.Start(); err != nil {
		return err
	}
	p.logf("simulated trainer: reports progress for KWOK pods (log %s)", proc.LogFile())
	return nil
}

// RunSimTrainer reports for simulated pods as they start running, until ctx ends.
func (p *Platform) RunSimTrainer(ctx context.Context) error {
	cfg, err := p.RESTConfig()
	if err != nil {
		return err
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	ca, err := os.ReadFile(p.PKI().CAFile())
	if err != nil {
		return err
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(ca) {
		return fmt.Errorf("no certificate in %s", p.PKI().CAFile())
	}
	s := &simTrainer{
		token: func(ctx context.Context, ns, sa string, tr *authnv1.TokenRequest) (*authnv1.TokenRequest, error) {
			return cs.CoreV1().ServiceAccounts(ns).CreateToken(ctx, sa, tr, metav1.CreateOptions{})
		},
		clock: time.Now,
		post:  (&http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}}}).Do,
		url: func(ns, name string) string {
			return fmt.Sprintf("https://127.0.0.1:%d%s", p.OperatorStatus, trainer.StatusPath(ns, name))
		},
		defaultDuration: p.PodRunDuration, sem: make(chan struct{}, simReporters), started: map[types.UID]bool{},
		starts: rate.NewLimiter(simStartsPerSecond, 2*simStartsPerSecond),
		logf:   func(format string, args ...any) { fmt.Fprintf(p.Out, format+"\n", args...) },
	}
	nodes := &kwokNodes{client: cs}
	lw := cache.NewFilteredListWatchFromClient(cs.CoreV1().RESTClient(), "pods", metav1.NamespaceAll, func(o *metav1.ListOptions) {
		o.LabelSelector = jobsetv1alpha2.JobIndexKey + "=0"
	})
	_, informer := cache.NewInformerWithOptions(cache.InformerOptions{
		ListerWatcher: lw, ObjectType: &corev1.Pod{},
		Handler: cache.ResourceEventHandlerFuncs{
			AddFunc:    func(obj any) { s.consider(ctx, obj, nodes) },
			UpdateFunc: func(_, obj any) { s.consider(ctx, obj, nodes) },
		},
	})
	informer.RunWithContext(ctx)
	return nil
}

// kwokNodes tells KWOK's nodes from the real node's, remembering each node it looked up.
type kwokNodes struct {
	client kubernetes.Interface
	mu     sync.Mutex
	known  map[string]bool
}

func (k *kwokNodes) is(ctx context.Context, name string) bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	if v, ok := k.known[name]; ok {
		return v
	}
	n, err := k.client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return false
	}
	if k.known == nil {
		k.known = map[string]bool{}
	}
	k.known[name] = n.Annotations[kwokNodeAnnotation] == "fake"
	return k.known[name]
}

// simTrainer reports for pods, each once, at most cap(sem) at a time.
type simTrainer struct {
	// token asks the apiserver for a token of a ServiceAccount.
	token           func(ctx context.Context, namespace, serviceAccount string, tr *authnv1.TokenRequest) (*authnv1.TokenRequest, error)
	post            func(*http.Request) (*http.Response, error)
	url             func(namespace, trainJob string) string
	clock           func() time.Time
	defaultDuration time.Duration
	sem             chan struct{}
	// starts paces the pods' first reports (nil: unpaced).
	starts *rate.Limiter
	logf   func(format string, args ...any)

	mu      sync.Mutex
	started map[types.UID]bool
}

// consider starts reporting for pod if it is a running rank 0 of a trainer on a KWOK node
// that no report started for yet.
func (s *simTrainer) consider(ctx context.Context, obj any, nodes *kwokNodes) {
	pod, ok := obj.(*corev1.Pod)
	if !ok || !simulatedRankZero(pod) || !nodes.is(ctx, pod.Spec.NodeName) {
		return
	}
	s.mu.Lock()
	if s.started[pod.UID] {
		s.mu.Unlock()
		return
	}
	s.started[pod.UID] = true
	s.mu.Unlock()
	select {
	case s.sem <- struct{}{}:
	default:
		s.logf("%s/%s: %d pods are being reported for already; this one stays silent", pod.Namespace, pod.Name, cap(s.sem))
		return
	}
	go func() {
		defer func() { <-s.sem }()
		if s.starts != nil && s.starts.Wait(ctx) != nil {
			return
		}
		if err := s.report(ctx, pod); err != nil {
			s.logf("%s/%s: %v", pod.Namespace, pod.Name, err)
		}
	}()
}

// simulatedRankZero says whether pod is a running rank 0 of a TrainJob's trainer with the
// status server's settings, and does not opt out.
func simulatedRankZero(pod *corev1.Pod) bool {
	if pod.Status.Phase != corev1.PodRunning || pod.DeletionTimestamp != nil || pod.Annotations[AnnotationSimProgress] == "off" ||
		pod.Labels[jobsetv1alpha2.JobIndexKey] != "0" || pod.Annotations["batch.kubernetes.io/job-completion-index"] != "0" ||
		pod.Labels[jobsetv1alpha2.JobSetNameKey] == "" || len(pod.Spec.Containers) == 0 {
		return false
	}
	for _, e := range pod.Spec.Containers[0].Env {
		if e.Name == trainer.EnvStatusServerURL {
			return true
		}
	}
	return false
}

// simSteps is how many reports a simulated run of d gets: one every half second, 3 to 20.
func simSteps(d time.Duration) int {
	return min(max(int(d/(500*time.Millisecond)), 3), 20)
}

// simLoss is a training curve's loss at step of steps: falling fast, then slowly.
func simLoss(step, steps int) float64 {
	return 0.2 + 2.1*math.Exp(-3*float64(step)/float64(steps))
}

// report posts the pod's steps, spread over its simulated run, and stops when the status
// server refuses (the pod or its job is gone) or ctx ends.
func (s *simTrainer) report(ctx context.Context, pod *corev1.Pod) error {
	job := pod.Labels[jobsetv1alpha2.JobSetNameKey]
	d := s.defaultDuration
	if v, err := time.ParseDuration(pod.Annotations[AnnotationSimDuration]); err == nil && v > 0 {
		d = v
	}
	sa := cmpOr(pod.Spec.ServiceAccountName, "default")
	tr, err := s.token(ctx, pod.Namespace, sa, &authnv1.TokenRequest{Spec: authnv1.TokenRequestSpec{
		Audiences:         []string{trainer.TokenAudience(pod.Namespace, job)},
		ExpirationSeconds: ptr.To[int64](3600),
		BoundObjectRef:    &authnv1.BoundObjectReference{Kind: "Pod", APIVersion: "v1", Name: pod.Name, UID: pod.UID},
	}})
	if err != nil {
		return fmt.Errorf("a token bound to the pod: %w", err)
	}
	steps := simSteps(d)
	interval := d / time.Duration(steps+1)
	started := s.clock()
	for step := 1; step <= steps; step++ {
		if err := sleepCtx(ctx, started.Add(time.Duration(step)*interval).Sub(s.clock())); err != nil {
			return nil
		}
		eta := int32(max(time.Duration(steps-step)*interval, 0) / time.Second)
		status := trainer.UpdateTrainJobStatusRequest{TrainerStatus: &trainer.TrainerStatus{
			ProgressPercentage:        ptr.To(int32(100 * step / steps)),
			EstimatedRemainingSeconds: ptr.To(eta),
			Metrics: []trainer.Metric{
				{Name: kiln.MetricStep, Value: strconv.Itoa(step)}, {Name: kiln.MetricTotalSteps, Value: strconv.Itoa(steps)},
				{Name: "loss", Value: strconv.FormatFloat(simLoss(step, steps), 'f', 4, 64)},
			},
			LastUpdatedTime: metav1.NewTime(s.clock()),
		}}
		if done, err := s.send(ctx, s.url(pod.Namespace, job), tr.Status.Token, status); done || err != nil {
			return err
		}
	}
	return nil
}

// send posts one report; done when the status server says the pod may report no more.
func (s *simTrainer) send(ctx context.Context, url, token string, status trainer.UpdateTrainJobStatusRequest) (done bool, err error) {
	body, err := json.Marshal(status)
	if err != nil {
		return true, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return true, err
	}
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	res, err := s.post(req)
	if err != nil {
		return false, nil // the operator restarting: the next report may pass
	}
	defer res.Body.Close()
	msg, _ := io.ReadAll(io.LimitReader(res.Body, 512))
	switch {
	case res.StatusCode == http.StatusOK:
		return false, nil
	case res.StatusCode == http.StatusForbidden || res.StatusCode == http.StatusNotFound || res.StatusCode == http.StatusConflict:
		return true, nil // the pod, or its job, is gone or finished
	case res.StatusCode >= 500 || res.StatusCode == http.StatusTooManyRequests:
		return false, nil
	}
	return true, fmt.Errorf("the status server answered %d: %s", res.StatusCode, bytes.TrimSpace(msg))
}

// sleepCtx waits d, or until ctx ends (an error).
func sleepCtx(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}
