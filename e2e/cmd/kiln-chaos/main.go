// Command kiln-chaos runs the chaos scenario (package chaos) on a fresh local platform and
// writes its figures into docs/reliability.md. `make chaos` runs it.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/go-logr/logr"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/kiln-ml/kiln/e2e/internal/chaos"
	"github.com/kiln-ml/kiln/e2e/internal/platform"
)

const (
	begin = "<!-- chaos:begin (make chaos writes this part) -->"
	end   = "<!-- chaos:end -->"
)

func main() {
	root := flag.String("root", "", "repository root (default: the nearest directory with go.work)")
	jobs := flag.Int("jobs", 200, "TrainJobs with deadlines and TTLs")
	submissions := flag.Int("submissions", 1000, "CreateTrainJob calls through the API server, each with a request id")
	kills := flag.Int("kills", 24, "SIGKILLs, at random instants, of the operator, the API server, JobSet and Kueue")
	span := flag.Duration("span", 2*time.Minute, "time over which the kills and the submissions are spread")
	seed := flag.Uint64("seed", uint64(time.Now().UnixNano()), "seed of the instants and victims")
	report := flag.Bool("report", true, "write the figures into docs/reliability.md")
	flag.Parse()
	ctrllog.SetLogger(logr.Discard())
	if err := run(*root, chaos.Options{Jobs: *jobs, Submissions: *submissions, Kills: *kills, Span: *span, Seed: *seed, Timeout: 20 * time.Minute, Out: os.Stdout}, *report); err != nil {
		fmt.Fprintln(os.Stderr, "kiln-chaos:", err)
		os.Exit(1)
	}
}

func run(rootFlag string, o chaos.Options, report bool) error {
	root, err := platform.RepoRoot(rootFlag)
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	cfg := platform.DefaultConfig(root)
	cfg.RealNodes = 0             // the jobs run on the KWOK fleet
	cfg.SimulatedProgress = false // the run counts the operator's writes, not a simulation's
	cfg.Install = platform.InstallProcesses
	logPath := filepath.Join(cfg.StateDir, "..", "chaos-platform.log")
	plog, err := os.Create(logPath)
	if err != nil {
		return err
	}
	defer plog.Close()
	p := &platform.Platform{Config: cfg, Out: plog}
	fmt.Printf("kiln-chaos: a fresh platform (log %s), seed %d\n", logPath, o.Seed)
	if err := p.Down(ctx); err != nil {
		return err
	}
	if err := p.Up(ctx); err != nil {
		return fmt.Errorf("starting the platform (log %s): %w", logPath, err)
	}
	defer func() { _ = p.Down(context.WithoutCancel(ctx)) }()
	res, err := chaos.Run(ctx, p, o)
	if err != nil {
		return err
	}
	if report {
		if err := writeReport(filepath.Join(root, "docs", "reliability.md"), o, res); err != nil {
			return err
		}
	}
	if !res.OK() {
		return fmt.Errorf("%d failures:\n  %s", len(res.Failures), strings.Join(res.Failures, "\n  "))
	}
	return nil
}

// lateBound is how late a timer may act, restarts included, before the report lists it.
const lateBound = 2 * time.Second

// since is t from the run's start.
func since(r *chaos.Result, t time.Time) time.Duration {
	return t.Sub(r.Start).Round(100 * time.Millisecond)
}

func writeReport(path string, o chaos.Options, r *chaos.Result) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	text := string(data)
	i, j := strings.Index(text, begin), strings.Index(text, end)
	if i < 0 || j < i {
		return fmt.Errorf("%s has no %q ... %q section", path, begin, end)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%s\nThe latest `make chaos` run (seed %d, kills and submissions over %s; %s in all on a 2-core machine):\n\n", begin, o.Seed, o.Span, r.Took.Round(time.Second))
	b.WriteString("| | |\n|---|---|\n")
	late, inOutage := r.Late(lateBound)
	kills := 0
	var per []string
	for _, c := range platform.Components {
		kills += r.Kills[c]
		per = append(per, fmt.Sprintf("%s %d", c, r.Kills[c]))
	}
	rows := [][2]string{
		{"TrainJobs (with a deadline / completing), each with a TTL", fmt.Sprintf("%d (%d / %d)", r.Jobs, r.Deadlines, r.TTLs)},
		{"SIGKILLs", fmt.Sprintf("%d (%s)", kills, strings.Join(per, ", "))},
		{"deadlines missed / doubled", fmt.Sprintf("%d / %d", r.MissedDeadlines, r.DoubledDeadlines)},
		{"TTL deletions missed / doubled", fmt.Sprintf("%d / %d", r.MissedTTLs, r.DoubledTTLs)},
		{"JobSets created twice", fmt.Sprint(r.RecreatedJobSets)},
		{"submissions through the API server (retries, replayed)", fmt.Sprintf("%d (%d, %d)", r.Submissions, r.SubmitRetries, r.Replayed)},
		{"submissions lost / duplicated", fmt.Sprintf("%d / %d", r.Lost, r.Duplicated)},
		{"invalid TrainJobs admitted", fmt.Sprintf("%d of %d tried", r.InvalidAdmitted, r.InvalidAttempts)},
		{"deadlines: due (`startTime` + `activeDeadlineSeconds`) to `Failed` seen", chaos.Spread(r.Lags("deadline"))},
		{"TTLs: due (`completionTime` + `ttlSecondsAfterFinished`) to the deletion seen", chaos.Spread(r.Lags("ttl"))},
		{"time in Kueue's queue: created to `startTime`", chaos.Spread(r.Waits)},
		{fmt.Sprintf("timers more than %s late (of them, due while the operator was down or starting)", lateBound), fmt.Sprintf("%d of %d (%d)", len(late), len(r.Timers), inOutage)},
	}
	for _, row := range rows {
		fmt.Fprintf(&b, "| %s | %s |\n", row[0], row[1])
	}
	if len(late) > 0 {
		b.WriteString("\nThe late timers (the operator's outages: killed at +s, ready again at +s, from the run's start):\n\n")
		for _, t := range late[:min(len(late), 10)] {
			fmt.Fprintf(&b, "- %s %s: due +%s, acted +%s (%s late)\n", t.Kind, t.Job, since(r, t.Due), since(r, t.Seen), t.Lag().Round(10*time.Millisecond))
		}
		var outs []string
		for _, o := range r.Outages {
			if o.Component == platform.ComponentOperator {
				outs = append(outs, fmt.Sprintf("+%s–+%s", since(r, o.Down), since(r, o.Back)))
			}
		}
		fmt.Fprintf(&b, "- the operator's outages: %s\n", strings.Join(outs, ", "))
	}
	b.WriteString(end)
	text = text[:i] + b.String() + text[j+len(end):]
	return os.WriteFile(path, []byte(text), 0o644)
}
