package kiln

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"iter"
	"maps"
	"slices"
	"strings"
	"syscall"
	"time"

	"connectrpc.com/connect"

	kilnv1 "github.com/kiln-ml/kiln/api/gen/kiln/v1"
)

// Status is what a job is doing, in the Kubeflow SDK's words (Queued and Suspended are
// Kiln's: a job waiting in Kueue is Queued, not Created).
type Status string

// The statuses a job reports.
const (
	StatusCreated   Status = "Created"
	StatusQueued    Status = "Queued"
	StatusRunning   Status = "Running"
	StatusSuspended Status = "Suspended"
	StatusComplete  Status = "Complete"
	StatusFailed    Status = "Failed"
)

// statuses are the words the server reports (TrainJobStatus.status) and filters by.
var statuses = []Status{StatusCreated, StatusQueued, StatusSuspended, StatusRunning, StatusComplete, StatusFailed}

func checkStatus(s Status) error {
	if slices.Contains(statuses, s) {
		return nil
	}
	return fmt.Errorf("status %q: want one of Created, Queued, Running, Suspended, Complete, Failed", s)
}

// statusOf is the job's status as the server says it; a server older than the field leaves
// it empty, and its state is said instead.
func statusOf(st *kilnv1.TrainJobStatus) Status {
	if s := Status(st.GetStatus()); s != "" {
		return s
	}
	return map[kilnv1.State]Status{
		kilnv1.State_STATE_QUEUED: StatusQueued, kilnv1.State_STATE_SUSPENDED: StatusSuspended, kilnv1.State_STATE_RUNNING: StatusRunning,
		kilnv1.State_STATE_COMPLETE: StatusComplete, kilnv1.State_STATE_FAILED: StatusFailed,
	}[st.GetState()]
}

// CustomTrainerContainer is the training container of a job: what runs on each node.
// Zero fields take the runtime's.
type CustomTrainerContainer struct {
	Image         string
	Command, Args []string
	NumNodes      int32
	// ResourcesPerNode are quantities by resource name, e.g. "nvidia.com/gpu": "8".
	ResourcesPerNode map[string]string
	Env              map[string]string
	NumProcsPerNode  int32
}

// Initializer says what the runtime's initializers download before training.
type Initializer struct {
	// Dataset and Model are URIs, e.g. hf://tatsu-lab/alpaca.
	Dataset, Model string
}

// TrainOptions is a job to submit.
type TrainOptions struct {
	// Runtime names a ClusterTrainingRuntime (or, with NamespacedRuntime, a TrainingRuntime
	// of the job's namespace).
	Runtime           string
	NamespacedRuntime bool
	Trainer           *CustomTrainerContainer
	Initializer       *Initializer
	// Queue is the Kueue LocalQueue; PriorityClass the Kueue WorkloadPriorityClass.
	Queue, PriorityClass string
	// Topology places all training nodes in one domain of this level of the queue's Kueue
	// Topology, e.g. "rack" or "block" (or a node label): the job waits until one has room,
	// or, with TopologyPreferred, is spread when none has.
	Topology          string
	TopologyPreferred bool
	// ActiveDeadlineSeconds fails the job after that long running (restarted on every
	// resume and Kueue admission); TTLSecondsAfterFinished deletes it that long after it
	// finished. Nil takes the runtime's runPolicy.
	ActiveDeadlineSeconds   *int64
	TTLSecondsAfterFinished *int32
	Labels, Annotations     map[string]string
	// Name, or GenerateName (default: the runtime's name and a dash) for the server to complete.
	Name, GenerateName string
	Namespace          string
	Suspend            bool
	// RequestID makes retries safe (random when empty): a retried request returns the job
	// the first attempt created.
	RequestID string
}

// Step is one pod of a job: a training node (node-0), a launcher or an initializer.
type Step struct {
	// Name is Kiln's ("launcher-0", "dataset-initializer-0"); KubeflowName the Kubeflow
	// SDK's ("node-0" for an MPI launcher, "dataset-initializer"). Logs take either.
	Name, KubeflowName string
	Status, Pod, Node  string
	Devices            map[string]int64
	Restarts           int32
	ExitCode           *int32
	Reason, Message    string
}

// TrainJob is a job and what happens to it.
type TrainJob struct {
	Name, Namespace, Runtime string
	Status                   Status
	Reason, Message          string
	NumNodes                 int32
	CreationTimestamp        time.Time
	// StartTime, CompletionTime, DeadlineTime (when the deadline fails the running job) and
	// TTLDeleteTime (when the TTL deletes the finished job) are nil when unset.
	StartTime, CompletionTime, DeadlineTime, TTLDeleteTime *time.Time
	// The deadline and TTL in force: the job's own, else its runtime's runPolicy.
	ActiveDeadlineSeconds   *int64
	TTLSecondsAfterFinished *int32
	// Queue is the Kueue LocalQueue; QueuePosition where the job waits in it (0: not waiting).
	Queue         string
	QueuePosition int32
	Labels        map[string]string
	Steps         []Step
	// Restarts counts the restarts of all the job's pods together by its runtime's failure
	// policy, RestartsCounted those that counted against its maxRestarts (disruptions do
	// not); docs/fault-tolerance.md.
	Restarts, RestartsCounted int32
	// Progress is what the job's trainer last reported (percent, ETA, step, metrics,
	// checkpoint), nil until it reports; Metrics are its latest metric values by name.
	// GetJobMetrics returns their history.
	Progress *Progress
	Metrics  map[string]string
	// Raw is the API's message, with every field the server returned.
	Raw *kilnv1.TrainJob
}

func timeOf(ts interface{ AsTime() time.Time }, valid bool) *time.Time {
	if !valid {
		return nil
	}
	t := ts.AsTime()
	return &t
}

func jobOf(j *kilnv1.TrainJob) *TrainJob {
	st, spec := j.GetStatus(), j.GetSpec()
	out := &TrainJob{
		Name: j.GetName(), Namespace: j.GetNamespace(), Runtime: spec.GetRuntime(),
		Status: statusOf(st), Reason: st.GetReason(), Message: st.GetMessage(),
		NumNodes: spec.GetNodes(), CreationTimestamp: j.GetCreateTime().AsTime(),
		StartTime:               timeOf(st.GetStartTime(), st.GetStartTime() != nil),
		CompletionTime:          timeOf(st.GetCompletionTime(), st.GetCompletionTime() != nil),
		DeadlineTime:            timeOf(st.GetDeadlineTime(), st.GetDeadlineTime() != nil),
		TTLDeleteTime:           timeOf(st.GetTtlDeleteTime(), st.GetTtlDeleteTime() != nil),
		ActiveDeadlineSeconds:   st.ActiveDeadlineSeconds,
		TTLSecondsAfterFinished: st.TtlSecondsAfterFinished,
		Queue:                   spec.GetQueue(), QueuePosition: st.GetQueue().GetPositionInLocalQueue(),
		Labels: maps.Clone(j.GetLabels()), Raw: j,
		Restarts: st.GetRestarts().GetCount(), RestartsCounted: st.GetRestarts().GetCountedTowardsMax(),
		Progress: progressOf(st.GetProgress()), Metrics: metricsOf(st.GetProgress()),
	}
	if out.Status == "" {
		out.Status = StatusCreated
	}
	if out.Queue == "" {
		out.Queue = st.GetQueue().GetLocalQueue()
	}
	for _, s := range st.GetSteps() {
		step := Step{Name: s.GetName(), KubeflowName: s.GetKubeflowName(), Status: s.GetPhase(), Pod: s.GetPod(), Node: s.GetNode(), Devices: map[string]int64{},
			Restarts: s.GetRestarts(), ExitCode: s.ExitCode, Reason: s.GetReason(), Message: s.GetMessage()}
		for _, d := range s.GetDevices() {
			step.Devices[d.GetResource()] = d.GetCount()
		}
		out.Steps = append(out.Steps, step)
	}
	return out
}

// Train submits a job and returns its name. It retries while the server is unavailable,
// with the same request id, so a lost answer never creates a second job.
func (c *Client) Train(ctx context.Context, o TrainOptions) (string, error) {
	spec, err := o.spec("TrainOptions")
	if err != nil {
		return "", err
	}
	gen := o.GenerateName
	if o.Name == "" && gen == "" {
		gen = o.Runtime + "-"
	}
	req := &kilnv1.CreateTrainJobRequest{
		Namespace: c.ns(o.Namespace), RequestId: requestID(o.RequestID),
		Source: &kilnv1.CreateTrainJobRequest_TrainJob{TrainJob: &kilnv1.NewTrainJob{
			Name: o.Name, GenerateName: gen, Labels: o.Labels, Annotations: o.Annotations, Spec: spec,
		}},
	}
	var res *connect.Response[kilnv1.CreateTrainJobResponse]
	err = retry(ctx, func() (err error) {
		res, err = c.Jobs.CreateTrainJob(ctx, connect.NewRequest(req))
		return err
	})
	if err != nil {
		return "", wrap(err)
	}
	c.warnAll(res.Msg.GetWarnings())
	return res.Msg.GetTrainJob().GetName(), nil
}

// spec is the job's spec; what names the options in errors.
func (o *TrainOptions) spec(what string) (*kilnv1.TrainJobSpec, error) {
	if o.Runtime == "" {
		return nil, errors.New(what + ".Runtime: name the runtime to train on, e.g. torch-distributed (see ListRuntimes)")
	}
	t := o.Trainer
	if t == nil {
		t = &CustomTrainerContainer{}
	}
	if t.NumNodes < 0 || t.NumProcsPerNode < 0 {
		return nil, fmt.Errorf("CustomTrainerContainer: NumNodes %d, NumProcsPerNode %d: want at least 1 (0 takes the runtime's)", t.NumNodes, t.NumProcsPerNode)
	}
	spec := &kilnv1.TrainJobSpec{
		Runtime: o.Runtime, Image: t.Image, Command: t.Command, Args: t.Args, Nodes: t.NumNodes, ProcsPerNode: t.NumProcsPerNode,
		Queue: o.Queue, PriorityClass: o.PriorityClass, Suspend: o.Suspend,
		ActiveDeadlineSeconds: o.ActiveDeadlineSeconds, TtlSecondsAfterFinished: o.TTLSecondsAfterFinished,
	}
	if o.NamespacedRuntime {
		spec.RuntimeKind = kilnv1.RuntimeKind_RUNTIME_KIND_NAMESPACED
	}
	switch {
	case o.TopologyPreferred && o.Topology == "":
		return nil, errors.New(what + ".TopologyPreferred: name the level with Topology, e.g. rack")
	case o.Topology != "":
		spec.Topology = &kilnv1.TopologyRequest{Level: o.Topology, Preferred: o.TopologyPreferred}
	}
	for _, k := range slices.Sorted(maps.Keys(t.Env)) {
		spec.Env = append(spec.Env, &kilnv1.EnvVar{Name: k, Value: t.Env[k]})
	}
	if len(t.ResourcesPerNode) > 0 {
		spec.ResourcesPerNode = &kilnv1.Resources{Requests: maps.Clone(t.ResourcesPerNode), Limits: maps.Clone(t.ResourcesPerNode)}
	}
	if o.Initializer != nil {
		spec.DatasetUri, spec.ModelUri = o.Initializer.Dataset, o.Initializer.Model
	}
	return spec, nil
}

// requestID is id, or a new one.
func requestID(id string) string {
	if id != "" {
		return id
	}
	return NewRequestID()
}

// NewRequestID returns a random request id. A create request that carries one is safe to
// retry: the server answers a retry with what the first attempt created.
func NewRequestID() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// transient says err is the server or the connection going away, worth calling again:
// Unavailable, or the connection reset under a call the caller did not cancel (connect
// reports a reset as Canceled, since on a server it means the client left).
func transient(ctx context.Context, err error) bool {
	switch connect.CodeOf(err) {
	case connect.CodeUnavailable:
		return true
	case connect.CodeCanceled:
		return ctx.Err() == nil && (errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE))
	}
	return false
}

// retry calls f again while the server is unavailable (a restart, a dropped connection),
// up to 5 attempts; f must be safe to repeat.
func retry(ctx context.Context, f func() error) error {
	backoff := 200 * time.Millisecond
	for attempt := 1; ; attempt++ {
		err := f()
		if !transient(ctx, err) || attempt == 5 {
			return err
		}
		var e *Error
		if w := wrap(err); errors.As(w, &e) && e.RetryAfter > 0 {
			backoff = e.RetryAfter
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, 3*time.Second)
	}
}

// ListOptions select jobs.
type ListOptions struct {
	Namespace     string
	AllNamespaces bool
	// LabelSelector is a Kubernetes label selector, e.g. "team=nlp".
	LabelSelector string
	// Statuses keeps the jobs in one of them; empty keeps all.
	Statuses []Status
}

// ListJobs lists jobs, ordered by namespace and name (every page).
func (c *Client) ListJobs(ctx context.Context, o ListOptions) ([]*TrainJob, error) {
	req := &kilnv1.ListTrainJobsRequest{Namespace: c.ns(o.Namespace), AllNamespaces: o.AllNamespaces, LabelSelector: o.LabelSelector, PageSize: 500}
	for _, s := range o.Statuses {
		if err := checkStatus(s); err != nil {
			return nil, fmt.Errorf("ListOptions.Statuses: %w", err)
		}
		req.Statuses = append(req.Statuses, string(s))
	}
	var out []*TrainJob
	for {
		var res *connect.Response[kilnv1.ListTrainJobsResponse]
		err := retry(ctx, func() (err error) {
			res, err = c.Jobs.ListTrainJobs(ctx, connect.NewRequest(req))
			return err
		})
		if err != nil {
			return nil, wrap(err)
		}
		for _, j := range res.Msg.GetTrainJobs() {
			out = append(out, jobOf(j))
		}
		if req.PageToken = res.Msg.GetNextPageToken(); req.PageToken == "" {
			return out, nil
		}
	}
}

// GetJob returns one job with its steps (pods) and timers; namespace "" is the client's.
func (c *Client) GetJob(ctx context.Context, namespace, name string) (*TrainJob, error) {
	var res *connect.Response[kilnv1.GetTrainJobResponse]
	err := retry(ctx, func() (err error) {
		res, err = c.Jobs.GetTrainJob(ctx, connect.NewRequest(&kilnv1.GetTrainJobRequest{Namespace: c.ns(namespace), Name: name}))
		return err
	})
	if err != nil {
		return nil, wrap(err)
	}
	return jobOf(res.Msg.GetTrainJob()), nil
}

// LogOptions say which lines GetJobLogs streams.
type LogOptions struct {
	Namespace string
	// Step is e.g. node-0 (the default) or dataset-initializer-0; AllSteps streams every
	// step, each line prefixed with [step].
	Step      string
	AllSteps  bool
	Container string
	// Follow waits for steps that have not started yet and streams new lines until the job finishes.
	Follow bool
	// Tail keeps the last lines of each step.
	Tail *int64
	// Attempt streams the kept logs of an earlier attempt (from 0); Previous those of the
	// attempt before the pods of now. A deleted pod's log (a restart, a preemption, the
	// deadline) is kept this way: its last MiB, of the job's newest attempts.
	Attempt  *int32
	Previous bool
}

// GetJobLogs streams the lines a job's step printed. Stop the loop to cancel the stream.
func (c *Client) GetJobLogs(ctx context.Context, name string, o LogOptions) iter.Seq2[string, error] {
	return func(yield func(string, error) bool) {
		step := o.Step
		if step == "" && !o.AllSteps {
			step = "node-0"
		}
		if o.AllSteps {
			step = ""
		}
		ctx, cancel := context.WithCancel(ctx)
		defer cancel()
		stream, err := c.Jobs.StreamLogs(ctx, connect.NewRequest(&kilnv1.StreamLogsRequest{
			Namespace: c.ns(o.Namespace), Name: name, Step: step, Container: o.Container, Follow: o.Follow, TailLines: o.Tail,
			Attempt: o.Attempt, Previous: o.Previous,
		}))
		if err != nil {
			yield("", wrap(err))
			return
		}
		defer func() { _ = stream.Close() }()
		for stream.Receive() {
			for _, l := range stream.Msg().GetLines() {
				text := l.GetText()
				if o.AllSteps {
					text = "[" + l.GetStep() + "] " + text
				}
				if !yield(text, nil) {
					return
				}
			}
		}
		if err := stream.Err(); err != nil {
			yield("", wrap(err))
		}
	}
}

// GetJobEvents returns the Kubernetes events of a job and of every object it owns, oldest first.
func (c *Client) GetJobEvents(ctx context.Context, namespace, name string) ([]*kilnv1.Event, error) {
	var res *connect.Response[kilnv1.ListEventsResponse]
	err := retry(ctx, func() (err error) {
		res, err = c.Jobs.ListEvents(ctx, connect.NewRequest(&kilnv1.ListEventsRequest{Namespace: c.ns(namespace), Name: name}))
		return err
	})
	if err != nil {
		return nil, wrap(err)
	}
	return res.Msg.GetEvents(), nil
}

// WaitOptions tune WaitForJobStatus.
type WaitOptions struct {
	Namespace string
	// Timeout bounds the wait (default 10 minutes); the context may end it sooner.
	Timeout time.Duration
	// Callbacks are called with the job on every change seen.
	Callbacks []func(*TrainJob)
}

// WaitForJobStatus waits until the job reaches one of statuses and returns it. A job that
// fails while StatusFailed is not among them returns a *JobFailedError; a job deleted
// meanwhile an error matching ErrNotFound; the timeout one matching ErrDeadlineExceeded.
// The wait follows the server's watch and resumes it if the connection drops.
func (c *Client) WaitForJobStatus(ctx context.Context, name string, statuses []Status, o WaitOptions) (*TrainJob, error) {
	if len(statuses) == 0 {
		return nil, errors.New("WaitForJobStatus: name at least one status, e.g. kiln.StatusComplete")
	}
	for _, s := range statuses {
		if err := checkStatus(s); err != nil {
			return nil, err
		}
	}
	timeout := o.Timeout
	if timeout <= 0 {
		timeout = 10 * time.Minute
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	ns := c.ns(o.Namespace)
	names := make([]string, len(statuses))
	for i, s := range statuses {
		names[i] = string(s)
	}
	var job *TrainJob
	_, err := c.WatchJob(ctx, ns, name, func(j *kilnv1.TrainJob) bool {
		job = jobOf(j)
		for _, cb := range o.Callbacks {
			cb(job)
		}
		return slices.Contains(statuses, job.Status) || job.Status == StatusFailed
	})
	switch {
	case err != nil:
		return nil, errorOfWait(err, ns, name, strings.Join(names, "/"), timeout, ctx.Err() != nil)
	case !slices.Contains(statuses, job.Status):
		return job, &JobFailedError{Job: job}
	}
	return job, nil
}

// SuspendJob stops a job's pods and its deadline clock; a queued job leaves Kueue's queue
// and its quota.
func (c *Client) SuspendJob(ctx context.Context, namespace, name string) (*TrainJob, error) {
	res, err := c.Jobs.SuspendTrainJob(ctx, connect.NewRequest(&kilnv1.SuspendTrainJobRequest{Namespace: c.ns(namespace), Name: name}))
	if err != nil {
		return nil, wrap(err)
	}
	return jobOf(res.Msg.GetTrainJob()), nil
}

// ResumeJob undoes SuspendJob: the job goes back to its queue (or runs again).
func (c *Client) ResumeJob(ctx context.Context, namespace, name string) (*TrainJob, error) {
	res, err := c.Jobs.ResumeTrainJob(ctx, connect.NewRequest(&kilnv1.ResumeTrainJobRequest{Namespace: c.ns(namespace), Name: name}))
	if err != nil {
		return nil, wrap(err)
	}
	return jobOf(res.Msg.GetTrainJob()), nil
}

// DeleteJob deletes a job and everything it owns.
func (c *Client) DeleteJob(ctx context.Context, namespace, name string) error {
	_, err := c.Jobs.DeleteTrainJob(ctx, connect.NewRequest(&kilnv1.DeleteTrainJobRequest{Namespace: c.ns(namespace), Name: name}))
	return wrap(err)
}

// ListRuntimes returns the cluster's runtimes, then the TrainingRuntimes of the namespace.
func (c *Client) ListRuntimes(ctx context.Context, namespace string) ([]*kilnv1.Runtime, error) {
	var res *connect.Response[kilnv1.ListRuntimesResponse]
	err := retry(ctx, func() (err error) {
		res, err = c.Runtimes.ListRuntimes(ctx, connect.NewRequest(&kilnv1.ListRuntimesRequest{Namespace: c.ns(namespace)}))
		return err
	})
	if err != nil {
		return nil, wrap(err)
	}
	return res.Msg.GetRuntimes(), nil
}

// GetRuntime returns a ClusterTrainingRuntime, or with a namespace a TrainingRuntime of it.
func (c *Client) GetRuntime(ctx context.Context, namespace, name string) (*kilnv1.Runtime, error) {
	req := &kilnv1.GetRuntimeRequest{Name: name, Kind: kilnv1.RuntimeKind_RUNTIME_KIND_CLUSTER}
	if namespace != "" {
		req.Namespace, req.Kind = namespace, kilnv1.RuntimeKind_RUNTIME_KIND_NAMESPACED
	}
	res, err := c.Runtimes.GetRuntime(ctx, connect.NewRequest(req))
	if err != nil {
		return nil, wrap(err)
	}
	return res.Msg.GetRuntime(), nil
}

// ListQueues returns Kueue's LocalQueues of the namespace (or of all the caller may list).
func (c *Client) ListQueues(ctx context.Context, namespace string, allNamespaces bool) ([]*kilnv1.Queue, error) {
	res, err := c.Queues.ListQueues(ctx, connect.NewRequest(&kilnv1.ListQueuesRequest{Namespace: c.ns(namespace), AllNamespaces: allNamespaces}))
	if err != nil {
		return nil, wrap(err)
	}
	return res.Msg.GetQueues(), nil
}
