// Package jobflags holds the flags that describe a training job, shared by `kiln submit` and
// `kiln schedules create` (whose runs are such a job), and the requests they make: a TrainJob,
// from the flags or a manifest (-f) they change, and a CronTrainJob whose runs it is (Schedule).
package jobflags

import (
	"context"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"connectrpc.com/connect"
	"github.com/spf13/cobra"
	"sigs.k8s.io/yaml"

	kilnv1 "github.com/kiln-ml/kiln/api/gen/kiln/v1"
	"github.com/kiln-ml/kiln/cli/internal/factory"
	"github.com/kiln-ml/kiln/cli/internal/printer"
	"github.com/kiln-ml/kiln/sdk-gen/go/kiln"
)

// Job is what the flags say of a job, and what to do once it is created.
type Job struct {
	// File is -f, a manifest ("-": standard input).
	File string
	// Convert takes a PyTorchJob, batch Job or v2alpha1 TrainJob in -f, converted by the server.
	Convert bool
	// source is -f's content once converted.
	source             []byte
	Name, GenerateName string
	Runtime            string
	NamespacedRuntime  bool
	Image              string
	Nodes              int32
	ProcsPerNode       int32
	GPUsPerNode        int64
	GPUResource        string
	CPU, Memory        string
	Queue              string
	PriorityClass      string
	Topology           string
	TopologyPreferred  bool
	Deadline, TTL      string
	Suspend            bool
	Env                []string
	Labels             []string
	Dataset, Model     string
	Command            []string
	DryRun             bool
	Wait, Follow       bool
	Timeout            time.Duration
	// Output is -o: json, yaml or name (Outputs).
	Output    string
	RequestID string
	// fieldFlags are the flags given that set the job's fields, which -f cannot be combined with.
	fieldFlags []string
}

// Outputs are what -o takes: the created job or schedule as JSON or YAML, or its name.
var Outputs = printer.Formats{printer.FormatJSON, printer.FormatYAML, printer.FormatName}

// Changed records which flags that describe the job's fields were set: a manifest (-f)
// cannot be combined with them.
func (j *Job) Changed(cmd *cobra.Command) {
	for _, name := range []string{"runtime", "namespaced-runtime", "image", "nodes", "procs-per-node", "gpus-per-node", "cpu", "memory", "env", "dataset", "model", "topology", "topology-preferred"} {
		if cmd.Flags().Changed(name) {
			j.fieldFlags = append(j.fieldFlags, "--"+name)
		}
	}
}

// Add adds the flags that describe the job to cmd.
func (j *Job) Add(cmd *cobra.Command) {
	fl := cmd.Flags()
	fl.StringVarP(&j.File, "filename", "f", "", "TrainJob manifest (YAML or JSON; - reads standard input)")
	fl.BoolVar(&j.Convert, "convert", false, "-f is a PyTorchJob (kubeflow.org/v1), batch Job or v2alpha1 TrainJob: convert it first, as kiln convert does, printing what changed")
	fl.StringVar(&j.Name, "name", "", "name of the job")
	fl.StringVar(&j.GenerateName, "generate-name", "", "prefix of a name the server completes (default: the runtime's name and a dash)")
	fl.StringVar(&j.Runtime, "runtime", "", "runtime to run on, e.g. torch-distributed (see kiln runtimes list)")
	fl.BoolVar(&j.NamespacedRuntime, "namespaced-runtime", false, "the runtime is a TrainingRuntime of the namespace, not a ClusterTrainingRuntime")
	fl.StringVar(&j.Image, "image", "", "training container image (default: the runtime's)")
	fl.Int32Var(&j.Nodes, "nodes", 0, "number of training nodes (default: the runtime's)")
	fl.Int32Var(&j.ProcsPerNode, "procs-per-node", 0, "processes per node (default: the runtime's)")
	fl.Int64Var(&j.GPUsPerNode, "gpus-per-node", 0, "GPUs per node")
	fl.StringVar(&j.GPUResource, "gpu-resource", "nvidia.com/gpu", "extended resource --gpus-per-node asks for")
	fl.StringVar(&j.CPU, "cpu", "", "CPUs per node, e.g. 8 or 500m")
	fl.StringVar(&j.Memory, "memory", "", "memory per node, e.g. 64Gi")
	fl.StringVar(&j.Queue, "queue", "", "Kueue LocalQueue to wait in")
	fl.StringVar(&j.PriorityClass, "priority-class", "", "Kueue WorkloadPriorityClass")
	fl.StringVar(&j.Topology, "topology", "", "place all training nodes in one domain of this level of the queue's Kueue Topology, e.g. rack or block (or a node label); the job waits until one has room")
	fl.BoolVar(&j.TopologyPreferred, "topology-preferred", false, "with --topology, prefer one domain but let Kueue spread the nodes when none has room")
	fl.StringVar(&j.Deadline, "deadline", "", "fail the job after it ran this long (activeDeadlineSeconds), e.g. 8h")
	fl.StringVar(&j.TTL, "ttl", "", "delete the job this long after it finished (ttlSecondsAfterFinished), e.g. 24h; 0 deletes it at once")
	fl.BoolVar(&j.Suspend, "suspend", false, "create it suspended (kiln resume starts it)")
	fl.StringArrayVar(&j.Env, "env", nil, "environment variable of the training container, NAME=VALUE (repeatable)")
	fl.StringArrayVar(&j.Labels, "label", nil, "label of the job, KEY=VALUE (repeatable)")
	fl.StringVar(&j.Dataset, "dataset", "", "dataset URI for the runtime's dataset initializer, e.g. hf://tatsu-lab/alpaca")
	fl.StringVar(&j.Model, "model", "", "model URI for the runtime's model initializer")
	fl.BoolVar(&j.DryRun, "dry-run", false, "print the TrainJob as Kubernetes would store it (validated, defaulted), without creating it")
	fl.BoolVar(&j.Wait, "wait", false, "wait until the job finished, showing its progress as kiln wait does; exit 3 if it failed")
	fl.BoolVar(&j.Follow, "follow", false, "stream the job's logs until it finished; exit 3 if it failed")
	fl.DurationVar(&j.Timeout, "timeout", 0, "with --wait or --follow, give up after this long (exit 4); 0 waits forever")
	Outputs.AddFlag(cmd, &j.Output, "print the created job: "+Outputs.String())
	fl.StringVar(&j.RequestID, "request-id", "", "id that makes retries of this submit safe (default: random)")
}

// Request builds the CreateTrainJob request, checking the flags; -n (f.Namespace) is its
// namespace, when given.
func (j *Job) Request(f *factory.Factory) (*kilnv1.CreateTrainJobRequest, error) {
	id := j.RequestID
	if id == "" {
		id = kiln.NewRequestID()
	}
	req := &kilnv1.CreateTrainJobRequest{Namespace: f.Namespace, DryRun: j.DryRun, RequestId: id}
	if j.Name != "" && j.GenerateName != "" {
		return nil, factory.Usagef("--name and --generate-name: set one")
	}
	// activeDeadlineSeconds is an int64, but the flag goes through a time.Duration, whose
	// range is smaller.
	deadline, err := seconds("--deadline", j.Deadline, 1, int64(math.MaxInt64/time.Second), "for no deadline")
	if err != nil {
		return nil, err
	}
	ttl, err := seconds("--ttl", j.TTL, 0, math.MaxInt32, "to keep the job")
	if err != nil {
		return nil, err
	}
	labels, err := pairs("--label", j.Labels)
	if err != nil {
		return nil, err
	}
	if j.File != "" {
		if len(j.fieldFlags) > 0 || len(j.Command) > 0 {
			return nil, factory.Usagef("%s cannot be combined with -f: change the manifest instead", strings.Join(append(j.fieldFlags, commandFlag(j.Command)...), ", "))
		}
		manifest, err := j.manifest(f, deadline, ttl, labels)
		if err != nil {
			return nil, err
		}
		req.Source = &kilnv1.CreateTrainJobRequest_Manifest{Manifest: manifest}
		return req, nil
	}
	if j.Runtime == "" {
		return nil, factory.Usagef("name a runtime with --runtime (`kiln runtimes list`), or give a manifest with -f")
	}
	if _, err := pairs("--env", j.Env); err != nil {
		return nil, err
	}
	spec := &kilnv1.TrainJobSpec{
		Runtime: j.Runtime, Image: j.Image, Command: j.Command, Nodes: j.Nodes, ProcsPerNode: j.ProcsPerNode,
		DatasetUri: j.Dataset, ModelUri: j.Model, Queue: j.Queue, PriorityClass: j.PriorityClass, Suspend: j.Suspend,
		ActiveDeadlineSeconds: deadline, TtlSecondsAfterFinished: int32Ptr(ttl),
	}
	if j.TopologyPreferred && j.Topology == "" {
		return nil, factory.Usagef("--topology-preferred: name the level with --topology, e.g. --topology rack")
	}
	if j.Topology != "" {
		spec.Topology = &kilnv1.TopologyRequest{Level: j.Topology, Preferred: j.TopologyPreferred}
	}
	if j.NamespacedRuntime {
		spec.RuntimeKind = kilnv1.RuntimeKind_RUNTIME_KIND_NAMESPACED
	}
	for _, kv := range j.Env {
		k, v, _ := strings.Cut(kv, "=")
		spec.Env = append(spec.Env, &kilnv1.EnvVar{Name: k, Value: v})
	}
	if j.GPUsPerNode < 0 {
		return nil, factory.Usagef("--gpus-per-node %d: want 0 or more", j.GPUsPerNode)
	}
	if j.GPUsPerNode > 0 || j.CPU != "" || j.Memory != "" {
		r := &kilnv1.Resources{Requests: map[string]string{}, Limits: map[string]string{}}
		if j.GPUsPerNode > 0 {
			r.Limits[j.GPUResource] = strconv.FormatInt(j.GPUsPerNode, 10)
		}
		if j.CPU != "" {
			r.Requests["cpu"] = j.CPU
		}
		if j.Memory != "" {
			r.Requests["memory"], r.Limits["memory"] = j.Memory, j.Memory
		}
		spec.ResourcesPerNode = r
	}
	job := &kilnv1.NewTrainJob{Name: j.Name, GenerateName: j.GenerateName, Labels: labels, Spec: spec}
	if job.Name == "" && job.GenerateName == "" {
		job.GenerateName = j.Runtime + "-"
	}
	req.Source = &kilnv1.CreateTrainJobRequest_TrainJob{TrainJob: job}
	return req, nil
}

func commandFlag(cmd []string) []string {
	if len(cmd) == 0 {
		return nil
	}
	return []string{"a command after --"}
}

// manifest reads -f and applies the flags that may change it.
func (j *Job) manifest(f *factory.Factory, deadline *int64, ttl *int64, labels map[string]string) (string, error) {
	data, err := j.source, error(nil)
	if data == nil {
		data, err = j.read(f)
	}
	if err != nil {
		return "", err
	}
	if j.Name == "" && j.GenerateName == "" && j.Queue == "" && j.PriorityClass == "" && deadline == nil && ttl == nil && !j.Suspend && len(labels) == 0 {
		return string(data), nil
	}
	obj := map[string]any{}
	if err := yaml.Unmarshal(data, &obj); err != nil {
		return "", fmt.Errorf("%s: not YAML or JSON: %w", j.File, err)
	}
	md := object(obj, "metadata")
	spec := object(obj, "spec")
	if j.Name != "" {
		md["name"] = j.Name
		delete(md, "generateName")
	}
	if j.GenerateName != "" {
		md["generateName"] = j.GenerateName
		delete(md, "name")
	}
	lbls := object(md, "labels")
	for k, v := range labels {
		lbls[k] = v
	}
	if j.Queue != "" {
		lbls["kueue.x-k8s.io/queue-name"] = j.Queue
	}
	if j.PriorityClass != "" {
		lbls["kueue.x-k8s.io/priority-class"] = j.PriorityClass
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
	if j.Suspend {
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

// ManifestNamespace is the namespace a manifest names, if any.
func ManifestNamespace(manifest string) string {
	var head struct {
		Metadata struct {
			Namespace string `json:"namespace"`
		} `json:"metadata"`
	}
	_ = yaml.Unmarshal([]byte(manifest), &head)
	return head.Metadata.Namespace
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
func (j *Job) read(f *factory.Factory) ([]byte, error) {
	data, err := f.ReadFile(j.File)
	if err != nil {
		return nil, fmt.Errorf("reading the manifest: %w", err)
	}
	return data, nil
}

// ConvertFile has the server convert -f into one TrainJob, which is then submitted as if -f had
// held it; what changed goes to standard error.
func (j *Job) ConvertFile(ctx context.Context, f *factory.Factory) error {
	if j.File == "" {
		return factory.Usagef("--convert needs -f: the PyTorchJob, Job or v2alpha1 TrainJob to convert")
	}
	data, err := j.read(f)
	if err != nil {
		return err
	}
	c, err := f.Client()
	if err != nil {
		return err
	}
	res, err := c.Jobs.ConvertManifests(ctx, connect.NewRequest(&kilnv1.ConvertManifestsRequest{Manifests: string(data), Namespace: f.Namespace}))
	if err != nil {
		return err
	}
	ms := res.Msg.GetManifests()
	if len(ms) != 1 || ms[0].GetKind() != "TrainJob" {
		return factory.Usagef("--convert submits one job, and %s holds %d documents (or a CronJob): convert them with `kiln convert -f %s`, then submit each (a CronTrainJob with `kiln schedules create -f`)", j.File, len(ms), j.File)
	}
	printer.ConversionWarnings(f.IO.ErrOut, res.Msg.GetWarnings(), false)
	fmt.Fprintf(f.IO.ErrOut, "converted %s into TrainJob %s\n", ms[0].GetSource(), ms[0].GetName())
	j.source = []byte(ms[0].GetManifest())
	return nil
}
