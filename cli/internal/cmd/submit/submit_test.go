package submit

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/testing/protocmp"
	clocktesting "k8s.io/utils/clock/testing"

	kilnv1 "github.com/kiln-ml/kiln/api/gen/kiln/v1"
	"github.com/kiln-ml/kiln/cli/internal/factory"
	"github.com/kiln-ml/kiln/cli/internal/iostreams"
	"github.com/kiln-ml/kiln/cli/internal/jobflags"
	"github.com/kiln-ml/kiln/cli/internal/kilntest"
)

// parse runs the command's flag parsing and returns the request it would send.
func parse(t *testing.T, args ...string) (*kilnv1.CreateTrainJobRequest, error) {
	t.Helper()
	io, _, _, _ := iostreams.Test()
	var req *kilnv1.CreateTrainJobRequest
	cmd := NewCmdSubmit(&factory.Factory{IO: io}, func(_ context.Context, o *Options) error {
		o.Job.RequestID = "fixed"
		var err error
		req, err = o.Job.Request(o.Factory)
		return err
	})
	cmd.SetArgs(args)
	cmd.SetOut(io.Out)
	cmd.SetErr(io.ErrOut)
	return req, cmd.Execute()
}

func TestSubmitFlags(t *testing.T) {
	got, err := parse(t, "--runtime", "torch-distributed", "--image", "img", "--nodes", "2", "--gpus-per-node", "8", "--cpu", "4",
		"--memory", "64Gi", "--queue", "default", "--deadline", "8h", "--ttl", "1d", "--suspend", "--env", "LR=0.1", "--env", "A=b=c",
		"--label", "team=nlp", "--name", "mnist", "--dataset", "hf://d", "--priority-class", "high", "--", "torchrun", "train.py", "--epochs", "3")
	if err != nil {
		t.Fatal(err)
	}
	want := &kilnv1.CreateTrainJobRequest{RequestId: "fixed", Source: &kilnv1.CreateTrainJobRequest_TrainJob{TrainJob: &kilnv1.NewTrainJob{
		Name: "mnist", Labels: map[string]string{"team": "nlp"},
		Spec: &kilnv1.TrainJobSpec{
			Runtime: "torch-distributed", Image: "img", Nodes: 2, Command: []string{"torchrun", "train.py", "--epochs", "3"},
			Env:              []*kilnv1.EnvVar{{Name: "LR", Value: "0.1"}, {Name: "A", Value: "b=c"}},
			ResourcesPerNode: &kilnv1.Resources{Requests: map[string]string{"cpu": "4", "memory": "64Gi"}, Limits: map[string]string{"nvidia.com/gpu": "8", "memory": "64Gi"}},
			Queue:            "default", PriorityClass: "high", Suspend: true, DatasetUri: "hf://d",
			ActiveDeadlineSeconds: i64(8 * 3600), TtlSecondsAfterFinished: i32(86400),
		},
	}}}
	if diff := cmp.Diff(want, got, protocmp.Transform()); diff != "" {
		t.Errorf("request (-want +got):\n%s", diff)
	}
	got, err = parse(t, "--runtime", "torch-distributed", "--queue", "tas", "--topology", "rack", "--topology-preferred")
	if want := (&kilnv1.TopologyRequest{Level: "rack", Preferred: true}); err != nil || !proto.Equal(got.GetTrainJob().GetSpec().GetTopology(), want) {
		t.Errorf("--topology rack --topology-preferred: %v, %v; want spec.topology %v", got.GetTrainJob().GetSpec().GetTopology(), err, want)
	}
	got, err = parse(t, "--runtime", "jax-distributed")
	if err != nil || got.GetTrainJob().GetGenerateName() != "jax-distributed-" {
		t.Errorf("a job without name is generated from its runtime's: %v, %v", got, err)
	}
}

func TestSubmitUsageErrors(t *testing.T) {
	manifest := filepath.Join(t.TempDir(), "job.yaml")
	if err := os.WriteFile(manifest, []byte("apiVersion: trainer.kubeflow.org/v1alpha1\nkind: TrainJob\nmetadata: {name: j}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for name, tc := range map[string]struct {
		args []string
		want string
	}{
		"no runtime":             {[]string{"--image", "x"}, "name a runtime with --runtime"},
		"command before --":      {[]string{"--runtime", "r", "torchrun"}, "put the command to run after --"},
		"bad deadline":           {[]string{"--runtime", "r", "--deadline", "soon"}, `--deadline "soon": want whole seconds`},
		"zero deadline":          {[]string{"--runtime", "r", "--deadline", "0s"}, "at least 1"},
		"fraction of a second":   {[]string{"--runtime", "r", "--ttl", "1.5s"}, "whole seconds"},
		"bad env":                {[]string{"--runtime", "r", "--env", "NOVALUE"}, `--env "NOVALUE": want NAME=VALUE`},
		"name and generate-name": {[]string{"--runtime", "r", "--name", "a", "--generate-name", "b-"}, "set one"},
		"manifest and fields":    {[]string{"-f", manifest, "--image", "x"}, "--image cannot be combined with -f"},
		"manifest and topology":  {[]string{"-f", manifest, "--topology", "rack"}, "--topology cannot be combined with -f"},
		"preferred, no level":    {[]string{"--runtime", "r", "--topology-preferred"}, "--topology-preferred: name the level with --topology"},
		"unknown flag":           {[]string{"--gpus", "8"}, "unknown flag: --gpus"},
		"zero nodes":             {[]string{"--runtime", "r", "--nodes", "0"}, "--nodes 0: at least 1 (leave --nodes out for the runtime's)"},
		"negative processes":     {[]string{"--runtime", "r", "--procs-per-node", "-1"}, "--procs-per-node -1: at least 1"},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := parse(t, tc.args...)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error = %v, want one saying %q", err, tc.want)
			}
		})
	}
}

func TestSubmitManifestOverrides(t *testing.T) {
	manifest := filepath.Join(t.TempDir(), "job.yaml")
	if err := os.WriteFile(manifest, []byte("apiVersion: trainer.kubeflow.org/v1alpha1\nkind: TrainJob\nmetadata:\n  name: from-file\nspec:\n  runtimeRef: {name: torch-distributed}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	got, err := parse(t, "-f", manifest, "--name", "renamed", "--deadline", "5s", "--queue", "q")
	if err != nil {
		t.Fatal(err)
	}
	m := got.GetManifest()
	for _, want := range []string{"name: renamed", "activeDeadlineSeconds: 5", "kueue.x-k8s.io/queue-name: q", "runtimeRef:"} {
		if !strings.Contains(m, want) {
			t.Errorf("manifest lacks %q:\n%s", want, m)
		}
	}
	unchanged, err := parse(t, "-f", manifest)
	if err != nil || !strings.Contains(unchanged.GetManifest(), "name: from-file") {
		t.Errorf("a manifest without overrides is sent as written: %v", err)
	}
}

func TestSubmit(t *testing.T) {
	s := kilntest.Start(t)
	f, io := s.Factory(false)
	o := &Options{Factory: f, Job: jobflags.Job{Runtime: "torch-distributed", Name: "mnist", Command: []string{"python", "train.py"}}}
	if err := run(t.Context(), o); err != nil {
		t.Fatal(err)
	}
	if got := io.Out.(interface{ String() string }).String(); got != "trainjob team/mnist created\n" {
		t.Errorf("output %q", got)
	}
	if ns := s.Created[0].GetNamespace(); ns != "team" {
		t.Errorf("created in %q, want the context's namespace team", ns)
	}
	if s.Created[0].GetRequestId() == "" {
		t.Errorf("a submit carries a request id, so retries are safe")
	}

	f, io = s.Factory(false)
	if err := run(t.Context(), &Options{Factory: f, Job: jobflags.Job{Runtime: "torch-distributed", Name: "dry", DryRun: true}}); err != nil {
		t.Fatal(err)
	}
	if got := io.Out.(interface{ String() string }).String(); !strings.HasPrefix(got, "apiVersion: trainer.kubeflow.org/v1alpha1") || s.Job("team", "dry") != nil {
		t.Errorf("--dry-run printed %q and stored the job: %v", got, s.Job("team", "dry") != nil)
	}
}

func TestSubmitWaitExitCodes(t *testing.T) {
	for name, tc := range map[string]struct {
		final    kilnv1.State
		timeout  time.Duration
		deleted  bool
		wantCode int
		wantErr  string
	}{
		"complete":  {final: kilnv1.State_STATE_COMPLETE, wantCode: factory.ExitOK},
		"failed":    {final: kilnv1.State_STATE_FAILED, wantCode: factory.ExitFailed},
		"timed out": {timeout: 300 * time.Millisecond, wantCode: factory.ExitTimeout},
		"deleted":   {deleted: true, wantCode: factory.ExitError, wantErr: "the job was deleted"},
	} {
		t.Run(name, func(t *testing.T) {
			s := kilntest.Start(t)
			f, io := s.Factory(false)
			clk := clocktesting.NewFakeClock(kilntest.Now)
			f.Clock = clk
			go func() {
				// Once the command created the job and watches it, so that it sees the change happen.
				if s.WaitForWatches(t.Context(), 1) != nil {
					return
				}
				if tc.deleted {
					f, _ := s.Factory(false)
					c, _ := f.Client()
					_ = c.DeleteJob(t.Context(), "team", "w")
					return
				}
				if tc.final == kilnv1.State_STATE_UNSPECIFIED {
					clk.Step(tc.timeout)
					return
				}
				j := kilntest.Job("team", "w", tc.final)
				j.Status.Reason, j.Status.Message = "DeadlineExceeded", "TrainJob exceeded its active deadline"
				s.Put(j)
			}()
			err := run(t.Context(), &Options{Factory: f, Job: jobflags.Job{Runtime: "torch-distributed", Name: "w", Wait: true, Timeout: orDefault(tc.timeout, 10*time.Second)}})
			if got := factory.ExitCode(err); got != tc.wantCode {
				t.Fatalf("exit code %d (%v), want %d; stderr %q", got, err, tc.wantCode, io.ErrOut.(interface{ String() string }).String())
			}
			if tc.wantErr != "" && factory.Message(err, s.URL) != tc.wantErr {
				t.Errorf("message %q, want %q", factory.Message(err, s.URL), tc.wantErr)
			}
			if tc.final == kilnv1.State_STATE_FAILED && !strings.Contains(io.ErrOut.(interface{ String() string }).String(), "w Failed (DeadlineExceeded): TrainJob exceeded its active deadline") {
				t.Errorf("a failure names its reason: %q", io.ErrOut.(interface{ String() string }).String())
			}
		})
	}
}

// --wait in a pipe writes the progress of a job that reports, then how it ended, as kiln
// wait does: here the job goes silent and Kiln fails it.
func TestSubmitWaitInAPipeShowsProgress(t *testing.T) {
	s := kilntest.Start(t)
	f, io := s.Factory(false)
	go func() {
		if s.WaitForWatches(t.Context(), 1) != nil {
			return
		}
		j := kilntest.Job("team", "w", kilnv1.State_STATE_RUNNING)
		step := int64(1200)
		j.Status.Progress = &kilnv1.Progress{Step: &step}
		s.Put(j)
		j = kilntest.Job("team", "w", kilnv1.State_STATE_FAILED)
		j.Status.Reason, j.Status.Message = "ProgressDeadlineExceeded", "TrainJob reported no progress for 15m0s (its kiln.dev/progress-deadline is 15m0s), again after its pods were restarted for the same reason: failed, deleting its JobSet"
		j.Status.Progress = &kilnv1.Progress{Step: &step}
		s.Put(j)
	}()
	err := run(t.Context(), &Options{Factory: f, Job: jobflags.Job{Runtime: "torch-distributed", Name: "w", Wait: true, Timeout: 10 * time.Second}})
	if got := factory.ExitCode(err); got != factory.ExitFailed {
		t.Fatalf("exit code %d (%v), want %d", got, err, factory.ExitFailed)
	}
	want := "w  Running  step 1200\nw  Failed  step 1200\ntrainjob team/w Failed (ProgressDeadlineExceeded): TrainJob reported no progress for 15m0s " +
		"(its kiln.dev/progress-deadline is 15m0s), again after its pods were restarted for the same reason: failed, deleting its JobSet\n"
	if got := io.ErrOut.(interface{ String() string }).String(); got != want {
		t.Errorf("standard error\n got %q\nwant %q", got, want)
	}
}

func orDefault(d, def time.Duration) time.Duration {
	if d == 0 {
		return def
	}
	return d
}

func TestSubmitDurationBounds(t *testing.T) {
	const (
		ttlTooLong      = "is too long: the most is 24855d (2147483647 s); leave --ttl out to keep the job"
		deadlineTooLong = "is too long: the most is 106751d (9223372036 s); leave --deadline out for no deadline"
	)
	for name, tc := range map[string]struct {
		flag, value  string
		wantTTL      *int32
		wantDeadline *int64
		wantErr      string
	}{
		"ttl 0":                          {flag: "--ttl", value: "0", wantTTL: i32(0)},
		"ttl at the most, in seconds":    {flag: "--ttl", value: "2147483647s", wantTTL: i32(2147483647)},
		"ttl at the most, in days":       {flag: "--ttl", value: "24855d", wantTTL: i32(24855 * 86400)},
		"ttl a second over":              {flag: "--ttl", value: "2147483648s", wantErr: "--ttl 2147483648s " + ttlTooLong},
		"ttl a day over":                 {flag: "--ttl", value: "24856d", wantErr: "--ttl 24856d " + ttlTooLong},
		"ttl of 50000 days":              {flag: "--ttl", value: "50000d", wantErr: "--ttl 50000d " + ttlTooLong},
		"ttl that wrapped to 0":          {flag: "--ttl", value: "36028797018963968s", wantErr: ttlTooLong},
		"ttl beyond int64":               {flag: "--ttl", value: "99999999999999999999s", wantErr: ttlTooLong},
		"ttl below 0":                    {flag: "--ttl", value: "-1", wantErr: `--ttl "-1": want whole seconds of at least 0`},
		"deadline at the most":           {flag: "--deadline", value: "9223372036s", wantDeadline: i64(9223372036)},
		"deadline a second over":         {flag: "--deadline", value: "9223372037s", wantErr: "--deadline 9223372037s " + deadlineTooLong},
		"deadline too many days":         {flag: "--deadline", value: "106752d", wantErr: deadlineTooLong},
		"deadline too many hours":        {flag: "--deadline", value: "2562048h", wantErr: deadlineTooLong},
		"deadline days and hours over":   {flag: "--deadline", value: "106751d24h", wantErr: deadlineTooLong},
		"deadline that wrapped to 1 s":   {flag: "--deadline", value: "36028797018963969s", wantErr: deadlineTooLong},
		"deadline 0":                     {flag: "--deadline", value: "0", wantErr: `--deadline "0": want whole seconds of at least 1`},
		"deadline below 0":               {flag: "--deadline", value: "-5", wantErr: `--deadline "-5": want whole seconds of at least 1`},
		"deadline far below 0":           {flag: "--deadline", value: "-99999999999999999999", wantErr: "want whole seconds of at least 1"},
		"a bare number: which unit?":     {flag: "--deadline", value: "90", wantErr: "--deadline 90: a number needs a unit: did you mean 90s or 90m?"},
		"a bare ttl: which unit?":        {flag: "--ttl", value: "3600", wantErr: "--ttl 3600: a number needs a unit: did you mean 3600s or 3600m?"},
		"deadline far below 0, in hours": {flag: "--deadline", value: "-2562048h", wantErr: "want whole seconds of at least 1"},
	} {
		t.Run(name, func(t *testing.T) {
			got, err := parse(t, "--runtime", "r", tc.flag, tc.value)
			if tc.wantErr != "" {
				if code := factory.ExitCode(err); code != factory.ExitUsage || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error = %v (exit code %d), want a usage error saying %q", err, code, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			spec := got.GetTrainJob().GetSpec()
			if diff := cmp.Diff(tc.wantTTL, spec.TtlSecondsAfterFinished); diff != "" {
				t.Errorf("ttlSecondsAfterFinished (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.wantDeadline, spec.ActiveDeadlineSeconds); diff != "" {
				t.Errorf("activeDeadlineSeconds (-want +got):\n%s", diff)
			}
		})
	}
}

func i64(v int64) *int64 { return &v }
func i32(v int32) *int32 { return &v }

// parseSchedule runs the command's flag parsing and returns the schedule request it would send.
func parseSchedule(t *testing.T, args ...string) (*kilnv1.CreateCronTrainJobRequest, error) {
	t.Helper()
	io, _, _, _ := iostreams.Test()
	var req *kilnv1.CreateCronTrainJobRequest
	cmd := NewCmdSubmit(&factory.Factory{IO: io}, func(_ context.Context, o *Options) error {
		o.Job.RequestID = "fixed"
		var err error
		req, err = o.Schedule.Request(&o.Job, o.Factory)
		return err
	})
	cmd.SetArgs(args)
	cmd.SetOut(io.Out)
	cmd.SetErr(io.ErrOut)
	return req, cmd.Execute()
}

func TestSubmitSchedule(t *testing.T) {
	got, err := parseSchedule(t, "--schedule", "0 2 * * 0", "--name", "weekly", "--runtime", "torch-distributed", "--deadline", "12h", "--", "python", "train.py")
	if err != nil {
		t.Fatal(err)
	}
	cj := got.GetCronTrainJob()
	if cj.GetName() != "weekly" || cj.GetSpec().GetSchedule() != "0 2 * * 0" || cj.GetSpec().GetTrainJob().GetSpec().GetActiveDeadlineSeconds() != 12*3600 ||
		cj.GetSpec().SuccessfulJobsHistoryLimit != nil || got.GetRequestId() != "fixed" {
		t.Errorf("request %v", got)
	}

	// A TrainJob manifest becomes the template of the runs; its labels go to both.
	manifest := filepath.Join(t.TempDir(), "job.yaml")
	if err := os.WriteFile(manifest, []byte("apiVersion: trainer.kubeflow.org/v1alpha1\nkind: TrainJob\nmetadata:\n  name: nightly\n  labels: {team: nlp}\n"+
		"  annotations: {note: x}\nspec:\n  runtimeRef: {name: torch-distributed}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	got, err = parseSchedule(t, "-f", manifest, "--schedule", "@daily", "--concurrency-policy", "Replace", "--keep-failed", "0", "--queue", "q")
	if err != nil {
		t.Fatal(err)
	}
	m := got.GetManifest()
	for _, want := range []string{"kind: CronTrainJob", "apiVersion: kiln.dev/v1alpha1", "name: nightly", "schedule: '@daily'", "concurrencyPolicy: Replace",
		"failedJobsHistoryLimit: 0", "trainJobTemplate:", "note: x", "kueue.x-k8s.io/queue-name: q", "runtimeRef:"} {
		if !strings.Contains(m, want) {
			t.Errorf("manifest lacks %q:\n%s", want, m)
		}
	}
	if strings.Contains(m, "kind: TrainJob") {
		t.Errorf("manifest still a TrainJob:\n%s", m)
	}

	for _, args := range [][]string{
		{"--time-zone", "UTC", "--runtime", "r"},
		{"--schedule", "@daily", "--runtime", "r"},
		{"--schedule", "@daily", "--generate-name", "x-", "--runtime", "r"},
		{"--schedule", "@daily", "--name", "x", "--follow", "--runtime", "r"},
	} {
		if _, err := parseSchedule(t, args...); err == nil {
			t.Errorf("%v: want a usage error", args)
		}
	}
}

// --convert sends -f to ConvertManifests, submits the one TrainJob that comes back (the
// flags still apply to it), and prints what changed on standard error.
func TestSubmitConvert(t *testing.T) {
	s := kilntest.Start(t)
	s.ConvertAnswer = &kilnv1.ConvertManifestsResponse{
		Manifests: []*kilnv1.ConvertedManifest{{Kind: "TrainJob", Name: "mnist", Source: "PyTorchJob/mnist",
			Manifest: "apiVersion: trainer.kubeflow.org/v1alpha1\nkind: TrainJob\nmetadata:\n  name: mnist\nspec:\n  runtimeRef: {name: torch-distributed}\n  trainer: {numNodes: 2}\n"}},
		Warnings: []*kilnv1.ConversionWarning{{Source: "PyTorchJob/mnist", Field: "spec.runPolicy.backoffLimit", Message: "3: not carried over"}},
	}
	src := filepath.Join(t.TempDir(), "pytorchjob.yaml")
	if err := os.WriteFile(src, []byte("apiVersion: kubeflow.org/v1\nkind: PyTorchJob\nmetadata: {name: mnist}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	f, io := s.Factory(false)
	if err := run(t.Context(), &Options{Factory: f, Job: jobflags.Job{File: src, Convert: true, Queue: "default"}}); err != nil {
		t.Fatal(err)
	}
	if got := s.Converted[0].GetManifests(); !strings.Contains(got, "kind: PyTorchJob") {
		t.Errorf("converted %q", got)
	}
	m := s.Created[0].GetManifest()
	for _, want := range []string{"numNodes: 2", "kueue.x-k8s.io/queue-name: default"} {
		if !strings.Contains(m, want) {
			t.Errorf("submitted manifest lacks %q:\n%s", want, m)
		}
	}
	if got, want := io.ErrOut.(interface{ String() string }).String(), "warning: PyTorchJob/mnist spec.runPolicy.backoffLimit: 3: not carried over\nconverted PyTorchJob/mnist into TrainJob mnist\n"; got != want {
		t.Errorf("standard error %q, want %q", got, want)
	}

	s.ConvertAnswer.Manifests = append(s.ConvertAnswer.Manifests, &kilnv1.ConvertedManifest{Kind: "TrainJob", Name: "other"})
	f, _ = s.Factory(false)
	if err := run(t.Context(), &Options{Factory: f, Job: jobflags.Job{File: src, Convert: true}}); factory.ExitCode(err) != 2 || !strings.Contains(err.Error(), "kiln convert -f") {
		t.Errorf("two documents: %v, want a usage error pointing at kiln convert", err)
	}
	if err := run(t.Context(), &Options{Factory: f, Job: jobflags.Job{Convert: true}}); factory.ExitCode(err) != 2 {
		t.Errorf("--convert without -f: %v", err)
	}
}
