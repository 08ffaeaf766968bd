// Package submit is `kiln submit`: create a training job from a manifest or from flags,
// and optionally wait for it or follow its logs.
package submit

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"math"
	"regexp"
	"strconv"
	"strings"
	"time"

	"connectrpc.com/connect"
	"github.com/spf13/cobra"
	"sigs.k8s.io/yaml"

	kilnv1 "github.com/kiln-ml/kiln/api/gen/kiln/v1"
	"github.com/kiln-ml/kiln/cli/internal/cmd/convert"
	"github.com/kiln-ml/kiln/cli/internal/factory"
	"github.com/kiln-ml/kiln/cli/internal/jobs"
	"github.com/kiln-ml/kiln/cli/internal/printer"
)

// Options are what `kiln submit` was asked.
type Options struct {
	Factory *factory.Factory

	File string
	// Convert takes a PyTorchJob, batch Job or v2alpha1 TrainJob in -f, converted by the server.
	Convert bool
	// source is -f's content once converted.
	source              []byte
	Name, GenerateName  string
	Runtime             string
	NamespacedRuntime   bool
	Image               string
	Nodes               int32
	ProcsPerNode        int32
	GPUsPerNode         int64
	GPUResource         string
	CPU, Memory         string
	Queue               string
	PriorityClass       string
	Deadline, TTL       string
	Suspend             bool
	Env                 []string
	Labels              []string
	Dataset, Model      string
	Command             []string
	DryRun              bool
	Wait, Follow        bool
	Timeout             time.Duration
	Output              string
	RequestID           string
	fieldFlagsFromFlags []string

	// Schedule, when set, creates a CronTrainJob named Name whose runs are this job.
	Schedule          string
	TimeZone          string
	ConcurrencyPolicy string
	StartingDeadline  string
	KeepSuccessful    int32
	KeepFailed        int32
	scheduleFlags     []string
}

// NewCmdSubmit returns the command; runF replaces its run in tests.
func NewCmdSubmit(f *factory.Factory, runF func(context.Context, *Options) error) *cobra.Command {
	o := &Options{Factory: f}
	cmd := &cobra.Command{
		Use:   "submit [-f FILE | --runtime RUNTIME [flags]] [-- COMMAND [ARGS...]]",
		Short: "Submit a training job",
		Long: `Submit a training job: a TrainJob manifest (-f, "-" for standard input), or one described by flags
with the command to run after "--".

With -f, --name, --generate-name, --queue, --priority-class, --deadline, --ttl, --suspend and --label
change the manifest; the other job flags cannot be combined with it.

Durations (--deadline, --ttl) are like 90s, 45m, 8h or 2d. Retries of a submit are safe: the request
carries an id (--request-id, random by default), so a retried request never creates a second job.

With --schedule (a cron expression) it creates a schedule instead, a CronTrainJob named --name whose
runs are this job, as ` + "`kiln schedule create`" + ` does.`,
		Example: `  # Two nodes of 8 GPUs each, queued in Kueue, at most 8 hours, deleted a day after it finished
  kiln submit --runtime torch-distributed --image ghcr.io/me/train:v3 --nodes 2 --gpus-per-node 8 \
      --queue default --deadline 8h --ttl 24h -- torchrun train.py --epochs 3

  # A manifest, and follow its logs until it finishes
  kiln submit -f trainjob.yaml --follow

  # Retrain every Sunday at 02:00 Berlin time, never two runs at once, each run at most 12 hours
  kiln submit --schedule "0 2 * * 0" --time-zone Europe/Berlin --concurrency-policy Forbid \
      --name weekly-retrain --runtime torch-distributed --queue default --deadline 12h -- torchrun train.py

  # See the TrainJob Kubernetes would store, without creating it
  kiln submit --runtime torch-distributed --name try --dry-run -- python train.py`,
		Args: cobra.ArbitraryArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if cmd.ArgsLenAtDash() > 0 {
				return factory.Usagef("unexpected arguments before --: %s (the command to run goes after --)", strings.Join(args[:cmd.ArgsLenAtDash()], " "))
			}
			if cmd.ArgsLenAtDash() < 0 && len(args) > 0 {
				return factory.Usagef("unexpected arguments %q: put the command to run after --, e.g. kiln submit --runtime torch-distributed -- torchrun train.py", strings.Join(args, " "))
			}
			o.Command = args
			for name, v := range map[string]int32{"nodes": o.Nodes, "procs-per-node": o.ProcsPerNode} {
				if cmd.Flags().Changed(name) && v < 1 {
					return factory.Usagef("--%s %d: at least 1 (leave --%s out for the runtime's)", name, v, name)
				}
			}
			o.changed(cmd)
			if runF != nil {
				return runF(cmd.Context(), o)
			}
			return run(cmd.Context(), o)
		},
	}
	o.addFlags(cmd)
	o.addScheduleFlags(cmd, false)
	return cmd
}

// changed records which flags were set.
func (o *Options) changed(cmd *cobra.Command) {
	for _, name := range []string{"runtime", "namespaced-runtime", "image", "nodes", "procs-per-node", "gpus-per-node", "cpu", "memory", "env", "dataset", "model"} {
		if cmd.Flags().Changed(name) {
			o.fieldFlagsFromFlags = append(o.fieldFlagsFromFlags, "--"+name)
		}
	}
	for _, name := range []string{"time-zone", "concurrency-policy", "starting-deadline", "keep-successful", "keep-failed"} {
		if cmd.Flags().Changed(name) {
			o.scheduleFlags = append(o.scheduleFlags, "--"+name)
		}
	}
	if !cmd.Flags().Changed("keep-successful") {
		o.KeepSuccessful = -1
	}
	if !cmd.Flags().Changed("keep-failed") {
		o.KeepFailed = -1
	}
}

// addFlags adds the flags that describe the job.
func (o *Options) addFlags(cmd *cobra.Command) {
	fl := cmd.Flags()
	fl.StringVarP(&o.File, "filename", "f", "", "TrainJob manifest (YAML or JSON; - reads standard input)")
	fl.BoolVar(&o.Convert, "convert", false, "-f is a PyTorchJob (kubeflow.org/v1), batch Job or v2alpha1 TrainJob: convert it first (as `kiln convert`), printing what changed")
	fl.StringVar(&o.Name, "name", "", "name of the job")
	fl.StringVar(&o.GenerateName, "generate-name", "", "prefix of a name the server completes (default: the runtime's name and a dash)")
	fl.StringVar(&o.Runtime, "runtime", "", "runtime to run on, e.g. torch-distributed (`kiln runtimes list`)")
	fl.BoolVar(&o.NamespacedRuntime, "namespaced-runtime", false, "the runtime is a TrainingRuntime of the namespace, not a ClusterTrainingRuntime")
	fl.StringVar(&o.Image, "image", "", "training container image (default: the runtime's)")
	fl.Int32Var(&o.Nodes, "nodes", 0, "number of training nodes (default: the runtime's)")
	fl.Int32Var(&o.ProcsPerNode, "procs-per-node", 0, "processes per node (default: the runtime's)")
	fl.Int64Var(&o.GPUsPerNode, "gpus-per-node", 0, "GPUs per node")
	fl.StringVar(&o.GPUResource, "gpu-resource", "nvidia.com/gpu", "extended resource --gpus-per-node asks for")
	fl.StringVar(&o.CPU, "cpu", "", "CPUs per node, e.g. 8 or 500m")
	fl.StringVar(&o.Memory, "memory", "", "memory per node, e.g. 64Gi")
	fl.StringVar(&o.Queue, "queue", "", "Kueue LocalQueue to wait in")
	fl.StringVar(&o.PriorityClass, "priority-class", "", "Kueue WorkloadPriorityClass")
	fl.StringVar(&o.Deadline, "deadline", "", "fail the job after it ran this long (activeDeadlineSeconds), e.g. 8h")
	fl.StringVar(&o.TTL, "ttl", "", "delete the job this long after it finished (ttlSecondsAfterFinished), e.g. 24h; 0 deletes it at once")
	fl.BoolVar(&o.Suspend, "suspend", false, "create it suspended (`kiln resume` starts it)")
	fl.StringArrayVar(&o.Env, "env", nil, "environment variable of the training container, NAME=VALUE (repeatable)")
	fl.StringArrayVar(&o.Labels, "label", nil, "label of the job, KEY=VALUE (repeatable)")
	fl.StringVar(&o.Dataset, "dataset", "", "dataset URI for the runtime's dataset initializer, e.g. hf://tatsu-lab/alpaca")
	fl.StringVar(&o.Model, "model", "", "model URI for the runtime's model initializer")
	fl.BoolVar(&o.DryRun, "dry-run", false, "print the TrainJob as Kubernetes would store it (validated, defaulted), without creating it")
	fl.BoolVar(&o.Wait, "wait", false, "wait until the job finished; exit 3 if it failed")
	fl.BoolVar(&o.Follow, "follow", false, "stream the job's logs until it finished; exit 3 if it failed")
	fl.DurationVar(&o.Timeout, "timeout", 0, "with --wait or --follow, give up after this long (exit 4); 0 waits forever")
	fl.StringVarP(&o.Output, "output", "o", "", "print the created job: json, yaml or name")
	fl.StringVar(&o.RequestID, "request-id", "", "id that makes retries of this submit safe (default: random)")
}

func run(ctx context.Context, o *Options) error {
	if o.Schedule != "" || len(o.scheduleFlags) > 0 {
		return runSchedule(ctx, o)
	}
	if o.Convert {
		if err := o.convert(ctx); err != nil {
			return err
		}
	}
	req, err := o.request()
	if err != nil {
		return err
	}
	if o.Output != "" && o.Output != "json" && o.Output != "yaml" && o.Output != "name" {
		return factory.Usagef("--output %q: want json, yaml or name", o.Output)
	}
	c, err := o.Factory.Clients()
	if err != nil {
		return err
	}
	// -n wins; else a manifest's own namespace; else the context's.
	if req.Namespace == "" && (o.File == "" || manifestNamespace(req.GetManifest()) == "") {
		req.Namespace = c.Namespace
	}
	res, err := c.Jobs.CreateTrainJob(ctx, connect.NewRequest(req))
	if err != nil {
		return err
	}
	io, job := o.Factory.IO, res.Msg.GetTrainJob()
	switch {
	case o.DryRun:
		_, err := fmt.Fprint(io.Out, res.Msg.GetManifest())
		return err
	case o.Output == "json":
		err = printer.JSON(io.Out, job)
	case o.Output == "yaml":
		err = printer.YAML(io.Out, job)
	case o.Output == "name":
		_, err = fmt.Fprintln(io.Out, job.GetName())
	default:
		verb := "created"
		if res.Msg.GetReplayed() {
			verb = "already created by this request"
		}
		_, err = fmt.Fprintf(io.Out, "trainjob %s/%s %s\n", job.GetNamespace(), job.GetName(), verb)
		if err == nil && io.IsTTY() && !o.Wait && !o.Follow {
			fmt.Fprintf(io.ErrOut, "%s\n", io.Gray(fmt.Sprintf("Follow it: kiln logs -f %s   Its state: kiln describe %s", job.GetName(), job.GetName())))
		}
	}
	if err != nil || (!o.Wait && !o.Follow) {
		return err
	}
	ctx, cancel := o.Factory.WithTimeout(ctx, o.Timeout)
	defer cancel()
	if o.Follow {
		err := jobs.StreamLogs(ctx, c.Jobs, io, job.GetNamespace(), job.GetName(), jobs.LogOptions{Follow: true, Prefix: true})
		if err != nil && ctx.Err() == nil {
			return err
		}
	}
	progress := &jobs.Progress{IO: io, Now: o.Factory.Clock.Now}
	final, err := jobs.Wait(ctx, c.Jobs, job.GetNamespace(), job.GetName(), jobs.Finished, progress.Show)
	progress.Done()
	if factory.TimedOut(ctx, err) {
		err = context.DeadlineExceeded
	}
	return Outcome(io.Out, io.ErrOut, final, err, o.Timeout)
}

// Outcome reports how a waited-for job ended, with the CLI's exit codes.
func Outcome(out, errOut io.Writer, j *kilnv1.TrainJob, err error, timeout time.Duration) error {
	if errors.Is(err, context.DeadlineExceeded) || connect.CodeOf(err) == connect.CodeDeadlineExceeded {
		return &factory.ExitErr{Code: factory.ExitTimeout, Err: fmt.Errorf("timed out after %s waiting for the job", timeout)}
	}
	if err != nil {
		return err
	}
	st := j.GetStatus()
	line := fmt.Sprintf("trainjob %s/%s %s", j.GetNamespace(), j.GetName(), printer.StateName(st.GetState()))
	if st.GetReason() != "" {
		line += " (" + st.GetReason() + ")"
	}
	if st.GetState() == kilnv1.State_STATE_FAILED {
		if st.GetMessage() != "" {
			line += ": " + st.GetMessage()
		}
		fmt.Fprintln(errOut, line)
		return &factory.ExitErr{Code: factory.ExitFailed}
	}
	fmt.Fprintln(out, line)
	return nil
}

// request builds the CreateTrainJob request, checking the flags.
func (o *Options) request() (*kilnv1.CreateTrainJobRequest, error) {
	id := o.RequestID
	if id == "" {
		id = RequestID()
	}
	req := &kilnv1.CreateTrainJobRequest{Namespace: o.Factory.Namespace, DryRun: o.DryRun, RequestId: id}
	if o.Name != "" && o.GenerateName != "" {
		return nil, factory.Usagef("--name and --generate-name: set one")
	}
	// activeDeadlineSeconds is an int64, but the flag goes through a time.Duration, whose
	// range is smaller.
	deadline, err := seconds("--deadline", o.Deadline, 1, int64(math.MaxInt64/time.Second), "for no deadline")
	if err != nil {
		return nil, err
	}
	ttl, err := seconds("--ttl", o.TTL, 0, math.MaxInt32, "to keep the job")
	if err != nil {
		return nil, err
	}
	labels, err := pairs("--label", o.Labels)
	if err != nil {
		return nil, err
	}
	if o.File != "" {
		if len(o.fieldFlagsFromFlags) > 0 || len(o.Command) > 0 {
			return nil, factory.Usagef("%s cannot be combined with -f: change the manifest instead", strings.Join(append(o.fieldFlagsFromFlags, commandFlag(o.Command)...), ", "))
		}
		manifest, err := o.manifest(deadline, ttl, labels)
		if err != nil {
			return nil, err
		}
		req.Source = &kilnv1.CreateTrainJobRequest_Manifest{Manifest: manifest}
		return req, nil
	}
	if o.Runtime == "" {
		return nil, factory.Usagef("name a runtime with --runtime (`kiln runtimes list`), or give a manifest with -f")
	}
	if _, err := pairs("--env", o.Env); err != nil {
		return nil, err
	}
	spec := &kilnv1.TrainJobSpec{
		Runtime: o.Runtime, Image: o.Image, Command: o.Command, Nodes: o.Nodes, ProcsPerNode: o.ProcsPerNode,
		DatasetUri: o.Dataset, ModelUri: o.Model, Queue: o.Queue, PriorityClass: o.PriorityClass, Suspend: o.Suspend,
		ActiveDeadlineSeconds: deadline, TtlSecondsAfterFinished: int32Ptr(ttl),
	}
	if o.NamespacedRuntime {
		spec.RuntimeKind = kilnv1.RuntimeKind_RUNTIME_KIND_NAMESPACED
	}
	for _, kv := range o.Env {
		k, v, _ := strings.Cut(kv, "=")
		spec.Env = append(spec.Env, &kilnv1.EnvVar{Name: k, Value: v})
	}
	if o.GPUsPerNode < 0 {
		return nil, factory.Usagef("--gpus-per-node %d: want 0 or more", o.GPUsPerNode)
	}
	if o.GPUsPerNode > 0 || o.CPU != "" || o.Memory != "" {
		r := &kilnv1.Resources{Requests: map[string]string{}, Limits: map[string]string{}}
		if o.GPUsPerNode > 0 {
			r.Limits[o.GPUResource] = strconv.FormatInt(o.GPUsPerNode, 10)
		}
		if o.CPU != "" {
			r.Requests["cpu"] = o.CPU
		}
		if o.Memory != "" {
			r.Requests["memory"], r.Limits["memory"] = o.Memory, o.Memory
		}
		spec.ResourcesPerNode = r
	}
	job := &kilnv1.NewTrainJob{Name: o.Name, GenerateName: o.GenerateName, Labels: labels, Spec: spec}
	if job.Name == "" && job.GenerateName == "" {
		job.GenerateName = o.Runtime + "-"
	}
	req.Source = &kilnv1.CreateTrainJobRequest_TrainJob{TrainJob: job}
	return req, nil
}

// RequestID is a random request id, which makes the retries of one request safe.
func RequestID() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

func commandFlag(cmd []string) []string {
	if len(cmd) == 0 {
		return nil
	}
	return []string{"a command after --"}
}

// manifest reads -f and applies the flags that may change it.
func (o *Options) manifest(deadline *int64, ttl *int64, labels map[string]string) (string, error) {
	data, err := o.source, error(nil)
	if data == nil {
		data, err = o.read()
	}
	if err != nil {
		return "", err
	}
	if o.Name == "" && o.GenerateName == "" && o.Queue == "" && o.PriorityClass == "" && deadline == nil && ttl == nil && !o.Suspend && len(labels) == 0 {
		return string(data), nil
	}
	obj := map[string]any{}
	if err := yaml.Unmarshal(data, &obj); err != nil {
		return "", fmt.Errorf("%s: not YAML or JSON: %w", o.File, err)
	}
	md := object(obj, "metadata")
	spec := object(obj, "spec")
	if o.Name != "" {
		md["name"] = o.Name
		delete(md, "generateName")
	}
	if o.GenerateName != "" {
		md["generateName"] = o.GenerateName
		delete(md, "name")
	}
	lbls := object(md, "labels")
	for k, v := range labels {
		lbls[k] = v
	}
	if o.Queue != "" {
		lbls["kueue.x-k8s.io/queue-name"] = o.Queue
	}
	if o.PriorityClass != "" {
		lbls["kueue.x-k8s.io/priority-class"] = o.PriorityClass
	}
	if len(lbls) == 0 {
		delete(md, "labels")
	}
	if deadline != nil {
		spec["activeDeadlineSeconds"] = *deadline
	}
	if ttl != nil {
		spec["ttlSecondsAfterFinished"] = *ttl
	}
	if o.Suspend {
		spec["suspend"] = true
	}
	out, err := yaml.Marshal(obj)
	return string(out), err
}

func object(m map[string]any, key string) map[string]any {
	if v, ok := m[key].(map[string]any); ok {
		return v
	}
	v := map[string]any{}
	m[key] = v
	return v
}

func manifestNamespace(manifest string) string {
	var head struct {
		Metadata struct {
			Namespace string `json:"namespace"`
		} `json:"metadata"`
	}
	_ = yaml.Unmarshal([]byte(manifest), &head)
	return head.Metadata.Namespace
}

// seconds parses a duration flag (90s, 45m, 8h, 2d, or plain seconds) into whole seconds
// from minimum to maximum, the range of the field it fills; unset says what leaving the flag
// out does, for the message of a duration too long.
func seconds(flag, v string, minimum, maximum int64, unset string) (*int64, error) {
	if v == "" {
		return nil, nil
	}
	d, err := ParseDuration(v)
	if errors.Is(err, errTooLong) || (err == nil && int64(d/time.Second) > maximum) {
		return nil, factory.Usagef("%s %s is too long: the most is %dd (%d s); leave %s out %s", flag, v, maximum/secondsPerDay, maximum, flag, unset)
	}
	if err != nil || d%time.Second != 0 || int64(d/time.Second) < minimum {
		return nil, factory.Usagef("%s %q: want whole seconds of at least %d, like 90s, 45m, 8h or 2d", flag, v, minimum)
	}
	s := int64(d / time.Second)
	return &s, nil
}

const secondsPerDay = 24 * 60 * 60

// errTooLong is a duration beyond time.Duration's range (about 292 years), which would
// otherwise wrap around to a wrong one.
var errTooLong = errors.New("duration too long")

// digits are the numbers of a duration: their values decide its size, never its syntax.
var digits = regexp.MustCompile(`[0-9]+`)

// ParseDuration reads Go durations, plain seconds, and days (2d, 1d12h). A duration too long
// for time.Duration is an error wrapping errTooLong (too far below zero, an error of its own).
func ParseDuration(v string) (time.Duration, error) {
	// A number out of int64's range comes back as the extreme of its sign, out of range too.
	if n, err := strconv.ParseInt(v, 10, 64); err == nil || errors.Is(err, strconv.ErrRange) {
		return times(v, n, time.Second)
	}
	var days time.Duration
	rest := v
	if d, r, ok := strings.Cut(v, "d"); ok {
		n, err := strconv.ParseInt(d, 10, 64)
		if err != nil && !errors.Is(err, strconv.ErrRange) {
			return 0, err
		}
		if days, err = times(v, n, 24*time.Hour); err != nil || r == "" {
			return days, err
		}
		rest = r
	}
	d, err := time.ParseDuration(rest)
	if err != nil {
		// time.ParseDuration says the same of an overflow as of a typo: with every number
		// made 1, only a typo still fails.
		if _, serr := time.ParseDuration(digits.ReplaceAllString(rest, "1")); serr == nil {
			return 0, outOfRange(v, strings.HasPrefix(rest, "-"))
		}
		return 0, err
	}
	sum := days + d
	if (d > 0 && sum < days) || (d < 0 && sum > days) {
		return 0, outOfRange(v, d < 0)
	}
	return sum, nil
}

// times is n units of v, unless that is out of time.Duration's range.
func times(v string, n int64, unit time.Duration) (time.Duration, error) {
	if n > int64(math.MaxInt64/unit) || n < int64(math.MinInt64/unit) {
		return 0, outOfRange(v, n < 0)
	}
	return time.Duration(n) * unit, nil
}

func outOfRange(v string, negative bool) error {
	if negative {
		return fmt.Errorf("%s: duration too far below zero", v)
	}
	return fmt.Errorf("%s: %w", v, errTooLong)
}

func pairs(flag string, kvs []string) (map[string]string, error) {
	if len(kvs) == 0 {
		return nil, nil
	}
	out := map[string]string{}
	for _, kv := range kvs {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" {
			return nil, factory.Usagef("%s %q: want NAME=VALUE", flag, kv)
		}
		out[k] = v
	}
	return out, nil
}

func int32Ptr(v *int64) *int32 {
	if v == nil {
		return nil
	}
	i := int32(*v)
	return &i
}

// read reads -f.
func (o *Options) read() ([]byte, error) {
	data, err := o.Factory.ReadFile(o.File)
	if err != nil {
		return nil, fmt.Errorf("reading the manifest: %w", err)
	}
	return data, nil
}

// convert has the server convert -f into one TrainJob, which is then submitted as if -f had
// held it; what changed goes to standard error.
func (o *Options) convert(ctx context.Context) error {
	if o.File == "" {
		return factory.Usagef("--convert needs -f: the PyTorchJob, Job or v2alpha1 TrainJob to convert")
	}
	data, err := o.read()
	if err != nil {
		return err
	}
	c, err := o.Factory.Clients()
	if err != nil {
		return err
	}
	res, err := c.Jobs.ConvertManifests(ctx, connect.NewRequest(&kilnv1.ConvertManifestsRequest{Manifests: string(data), Namespace: o.Factory.Namespace}))
	if err != nil {
		return err
	}
	ms := res.Msg.GetManifests()
	if len(ms) != 1 || ms[0].GetKind() != "TrainJob" {
		return factory.Usagef("--convert submits one job, and %s holds %d documents (or a CronJob): convert them with `kiln convert -f %s`, then submit each (a CronTrainJob with `kiln schedule create -f`)", o.File, len(ms), o.File)
	}
	convert.PrintWarnings(o.Factory.IO.ErrOut, res.Msg.GetWarnings(), false)
	fmt.Fprintf(o.Factory.IO.ErrOut, "converted %s into TrainJob %s\n", ms[0].GetSource(), ms[0].GetName())
	o.source = []byte(ms[0].GetManifest())
	return nil
}
