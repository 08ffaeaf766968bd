package bench

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/procfs"
	"k8s.io/apimachinery/pkg/types"

	"github.com/kiln-ml/kiln/e2e/internal/platform"
)

func TestMachineOf(t *testing.T) {
	rest := fmt.Sprintf("%d cores", runtime.NumCPU())
	osArch := runtime.GOOS + "/" + runtime.GOARCH
	cases := map[string]struct {
		files map[string]string // under a made-up /proc; nil: no /proc at all
		want  string
	}{
		"x86 with padded model name": {
			files: map[string]string{
				"cpuinfo": "processor\t: 0\nvendor_id\t: GenuineIntel\nmodel name\t:       Intel(R) Xeon(R) CPU E5-2680 v4 @ 2.40GHz  \nflags\t\t: fpu vme\n\n" +
					"processor\t: 1\nvendor_id\t: GenuineIntel\nmodel name\t: Other\nflags\t\t: fpu vme\n",
				"meminfo": "MemTotal:       24684084 kB\nMemFree:         1000000 kB\n",
			},
			want: "Intel(R) Xeon(R) CPU E5-2680 v4 @ 2.40GHz, " + rest + ", 24 GiB, " + osArch,
		},
		"no cpuinfo": {
			files: map[string]string{"meminfo": "MemTotal:       16252928 kB\n"},
			want:  "unknown CPU, " + rest + ", 16 GiB, " + osArch,
		},
		"no meminfo": {
			files: map[string]string{"cpuinfo": "processor\t: 0\nmodel name\t: AMD EPYC\nflags\t\t: fpu\n"},
			want:  "AMD EPYC, " + rest + ", " + osArch,
		},
		"no /proc": {
			want: "unknown CPU, " + rest + ", " + osArch,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if tc.files["cpuinfo"] != "" && runtime.GOARCH != "amd64" && runtime.GOARCH != "386" {
				t.Skip("procfs parses /proc/cpuinfo in the format of the architecture it runs on")
			}
			var fs *procfs.FS
			if tc.files != nil {
				root := t.TempDir()
				for name, data := range tc.files {
					if err := os.WriteFile(filepath.Join(root, name), []byte(data), 0o644); err != nil {
						t.Fatal(err)
					}
				}
				f, err := procfs.NewFS(root)
				if err != nil {
					t.Fatal(err)
				}
				fs = &f
			}
			if diff := cmp.Diff(tc.want, machineOf(fs)); diff != "" {
				t.Errorf("machineOf() mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestCountBefore(t *testing.T) {
	tr := newTracker()
	t0 := time.Date(2026, 11, 27, 12, 0, 0, 0, time.UTC)
	for i, ns := range []string{"a", "a", "a", "b"} {
		tr.deadlineDue[types.NamespacedName{Namespace: ns, Name: fmt.Sprint(i)}] = t0.Add(time.Duration(i) * time.Second)
	}
	if got := tr.countBefore(tr.deadlineDue, "a", t0.Add(2*time.Second)); got != 2 {
		t.Fatalf("countBefore = %d, want 2 (due at +0 s and +1 s, not +2 s, not another namespace's)", got)
	}
}

func TestLagsByDueGroupsBySecondFromTheFirst(t *testing.T) {
	tr := newTracker()
	t0 := time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC)
	ms := time.Millisecond
	for i, j := range []struct {
		ns       string
		due, lag time.Duration
		seen     bool
	}{
		{"a", 0, 100 * ms, true}, {"a", 0, 300 * ms, true}, {"a", 2 * time.Second, 900 * ms, true},
		{"a", 2 * time.Second, 0, false},  // never seen: not counted
		{"b", -time.Minute, 5 * ms, true}, // another namespace's: neither counted nor the first
	} {
		k := types.NamespacedName{Namespace: j.ns, Name: fmt.Sprint(i)}
		tr.deadlineDue[k] = t0.Add(j.due)
		if j.seen {
			tr.deadlineSeen[k] = t0.Add(j.due + j.lag)
		}
	}
	got := formatByDue(tr.lagsByDue(tr.deadlineSeen, tr.deadlineDue, "a"))
	if want := "+0s 2: p50 0.10s max 0.30s, +2s 1: p50 0.90s max 0.90s"; got != want {
		t.Fatalf("formatByDue(lagsByDue()) = %q, want %q", got, want)
	}
}

func TestPodsReportGivesEachStageAndItsOwnPart(t *testing.T) {
	ms := func(v ...int) []time.Duration {
		var out []time.Duration
		for _, x := range v {
			out = append(out, time.Duration(x)*time.Millisecond)
		}
		return out
	}
	run := &podsRun{Trainer: "kiln", Variant: podsVariants[0].name, JobSet: ms(40, 50), Resumed: ms(40, 50), Created: ms(100, 120),
		Bound: ms(110, 130), Running: ms(800, 900), WorkerUp: ms(5000, 5200), Training: ms(7000, 7400)}
	o := PodsOptions{Trainers: []platform.Trainer{platform.TrainerKiln}, Jobs: 2, Report: filepath.Join(t.TempDir(), "pods.md")}
	if err := writePodsReport(o, []*podsRun{run}, "torch:1", time.Now(), time.Minute); err != nil {
		t.Fatal(err)
	}
	reportHas(t, o.Report,
		"| stage | kiln, direct |",
		"| every rank training (torch imported, rendezvous done) | 7000 / 7400 |",
		"| Workload admitted (Kueue) | — |",
		"| every rank training (torch imported, rendezvous done) | 2000 |", // 7000 − 5000
		"| every pod created (JobSet, Job controller) | 60 |",              // 100 − 40: JobSet running's median
	)
}

// reportHas fails the test for each line of want the report at path lacks.
func reportHas(t *testing.T, path string, want ...string) {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range want {
		if !strings.Contains(string(raw), w) {
			t.Errorf("the report lacks %q:\n%s", w, raw)
		}
	}
}

// The report puts the submission beside the throughput, both against the limit: the
// submission is the floor of the controller's part of the throughput figure.
func TestReportGivesTheSubmissionAgainstTheLimit(t *testing.T) {
	o := reportOptions(t)
	o.Runs = 1
	results := []*runResult{
		{Trainer: string(platform.TrainerKiln), Run: 1, Submit: 12 * time.Second, AllJobSets: 30 * time.Second, Limit: 15 * time.Second, Webhook: 100 * time.Millisecond},
		{Trainer: string(platform.TrainerUpstream), Run: 1, Submit: 9 * time.Second, AllJobSets: 90 * time.Second, Webhook: 50 * time.Millisecond},
	}
	if err := writeReport(o, results, nil, time.Now(), time.Minute); err != nil {
		t.Fatal(err)
	}
	reportHas(t, o.Report,
		"| Throughput: 1,000 running TrainJobs until all their JobSets exist | 30 s | 90 s | 0.33× | 2.00× |",
		"| Submitting them: the 1,000 TrainJob creates, first to last | 12 s | 9 s | 1.33× | 0.80× |",
		"| Physical limit: a plain client creates the same 1,000 JobSets with the same budget (once per run) | 15 s | | | |",
	)
}

// reportOptions are the default options with the report, and the samples beside it, in
// temporary directories.
func reportOptions(t *testing.T) Options {
	t.Helper()
	o := DefaultOptions(t.TempDir())
	if err := os.MkdirAll(filepath.Join(o.Root, "bin", "bench"), 0o755); err != nil { // where the samples go
		t.Fatal(err)
	}
	o.Report = filepath.Join(t.TempDir(), "bench.md")
	return o
}
