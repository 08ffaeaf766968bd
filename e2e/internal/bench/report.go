package bench

import (
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"time"

	"github.com/prometheus/procfs"

	"github.com/kiln-ml/kiln/e2e/internal/platform"
	"github.com/kiln-ml/kiln/e2e/internal/stats"
)

// figure is one number per run, for one controller.
type figure func(r *runResult) (float64, bool)

func durationFigure(f func(r *runResult) time.Duration) figure {
	return func(r *runResult) (float64, bool) {
		d := f(r)
		return d.Seconds(), d != 0
	}
}

func lagFigure(f func(r *runResult) []time.Duration, p float64) figure {
	return func(r *runResult) (float64, bool) {
		ds := f(r)
		return stats.Percentile(ds, p).Seconds() * 1000, len(ds) > 0
	}
}

// spread is min/median/max of a figure over the runs of one controller.
type spread struct {
	min, median, max float64
	n                int
}

func spreadOf(results []*runResult, trainer string, f figure) spread {
	var vs []float64
	for _, r := range results {
		if r.Trainer != trainer {
			continue
		}
		if v, ok := f(r); ok {
			vs = append(vs, v)
		}
	}
	return spreadOfValues(vs)
}

// spreadOfValues is the min, median and max of vs (sorted in place).
func spreadOfValues(vs []float64) spread {
	if len(vs) == 0 {
		return spread{}
	}
	slices.Sort(vs)
	med := vs[len(vs)/2]
	if len(vs)%2 == 0 {
		med = (vs[len(vs)/2-1] + vs[len(vs)/2]) / 2
	}
	return spread{min: vs[0], median: med, max: vs[len(vs)-1], n: len(vs)}
}

func (s spread) String(unit string, decimals int) string {
	if s.n == 0 {
		return "—"
	}
	f := func(v float64) string { return strings.TrimSuffix(fmt.Sprintf("%.*f", decimals, v), ".0") }
	if s.n == 1 || s.min == s.max {
		return f(s.median) + unit
	}
	return fmt.Sprintf("%s%s (%s–%s)", f(s.median), unit, f(s.min), f(s.max))
}

func ratio(a, b spread) string {
	if a.n == 0 || b.n == 0 || b.median == 0 {
		return "—"
	}
	return fmt.Sprintf("%.2f×", a.median/b.median)
}

func writeReport(o Options, results []*runResult, prog *progressResult, started time.Time, took time.Duration) error {
	kiln, up := string(platform.TrainerKiln), string(platform.TrainerUpstream)
	var b strings.Builder
	w := func(format string, args ...any) { fmt.Fprintf(&b, format+"\n", args...) }
	w("# Benchmarks: Kiln against upstream Kubeflow Trainer")
	w("")
	w("%s", generatedBy(o.MakeTarget, started, took))
	w("")
	w("Both controllers run in turn, each on a fresh local platform (the one `make up` starts: etcd, kube-apiserver,")
	w("kube-controller-manager and kube-scheduler v1.36.3, KWOK, JobSet v0.12.0, Kueue v0.19.0), with the same client")
	w("budget (%g QPS, burst %d) and %d TrainJobs reconciled in parallel. Upstream is Kubeflow Trainer v2.3.0's", o.Budget.QPS, o.Budget.Burst, o.Budget.Concurrency)
	w("controller manager built from its Go module, with its own CRDs, webhooks and runtimes. Every TrainJob uses the")
	w("`torch-distributed` ClusterTrainingRuntime with one node. Each cell is the median over %d runs (min–max), the", o.Runs)
	w("%s-TrainJob memory figure over %d; the run order alternates between runs. Lower is better everywhere.", count(o.MemoryJobs), min(o.MemoryRuns, o.Runs))
	w("")
	w("| figure | Kiln | upstream | Kiln / upstream | Kiln / limit |")
	w("|---|---|---|---|---|")
	limitS := spreadOf(results, kiln, durationFigure(func(r *runResult) time.Duration { return r.Limit }))
	row := func(name string, f figure, unit string, decimals int, vsLimit bool) {
		k, u := spreadOf(results, kiln, f), spreadOf(results, up, f)
		if k.n == 0 && u.n == 0 {
			return // a scenario this run left out
		}
		lim := ""
		if vsLimit {
			lim = ratio(k, limitS)
		}
		w("| %s | %s | %s | %s | %s |", name, k.String(unit, decimals), u.String(unit, decimals), ratio(k, u), lim)
	}
	row(fmt.Sprintf("Throughput: %s running TrainJobs until all their JobSets exist", count(o.Jobs)), durationFigure(func(r *runResult) time.Duration { return r.AllJobSets }), " s", 1, true)
	// The submission alone is the floor of the controller's part of the throughput figure: the
	// TrainJob creates (through both controllers' and Kueue's webhooks) load the same apiserver
	// as the JobSets' creates, which the limit times alone.
	row(fmt.Sprintf("Submitting them: the %s TrainJob creates, first to last", count(o.Jobs)), durationFigure(func(r *runResult) time.Duration { return r.Submit }), " s", 1, true)
	row("Submitting them: time the apiserver spent in the controller's webhooks per create", func(r *runResult) (float64, bool) {
		return r.Webhook.Seconds() * 1000, r.Submit != 0
	}, " ms", 1, false)
	row(fmt.Sprintf("Admission on an idle platform: time in the controller's webhooks per create (%d creates, each once the previous one's JobSet exists and the platform settled)", idleCreates), func(r *runResult) (float64, bool) {
		return r.IdleWebhook.Seconds() * 1000, len(r.IdleCreate) > 0
	}, " ms", 1, false)
	row("Admission on an idle platform: create call, p50", lagFigure(func(r *runResult) []time.Duration { return r.IdleCreate }, 50), " ms", 1, false)
	row(fmt.Sprintf("Admission one after another: time in the controller's webhooks per create (%d creates, each while the controller acts on the previous ones)", idleCreates), func(r *runResult) (float64, bool) {
		return r.SeqWebhook.Seconds() * 1000, len(r.SeqCreate) > 0
	}, " ms", 1, false)
	row("Admission one after another: create call, p50", lagFigure(func(r *runResult) []time.Duration { return r.SeqCreate }, 50), " ms", 1, false)
	if limitS.n > 0 {
		w("| Physical limit: a plain client creates the same %s JobSets with the same budget (once per run) | %s | | | |", count(o.Jobs), limitS.String(" s", 1))
	}
	if floorS := spreadOf(results, kiln, durationFigure(func(r *runResult) time.Duration { return r.Floor })); floorS.n > 0 {
		w("| Floor of the throughput figure: the same %s TrainJob creates through the same webhooks, each followed by its JobSet's create from a plain client with the same budget, no controller (once per run) | %s | | | %s |", count(o.Jobs), floorS.String(" s", 1), ratio(floorS, limitS))
		// Per run, against that run's floor: the hour moves both alike.
		overFloor := spreadOf(results, kiln, func(r *runResult) (float64, bool) {
			return r.AllJobSets.Seconds() / r.Floor.Seconds(), r.Floor > 0 && r.AllJobSets > 0
		})
		w("| Throughput over the floor of the same run | %s | | | |", overFloor.String("×", 2))
		row("Floor: its TrainJob creates, first to last", durationFigure(func(r *runResult) time.Duration { return r.FloorSubmit }), " s", 1, true)
		row("Floor: time the apiserver spent in the controller's webhooks per create", func(r *runResult) (float64, bool) {
			return r.FloorWebhook.Seconds() * 1000, r.Floor != 0
		}, " ms", 1, false)
	}
	// The timers' actions are timed to the apiserver's answer to the write that carries each
	// out (its audit log), and also to the bench's watch seeing it, which on a busy machine
	// delivers it up to a few tenths of a second later; without the audit log, to the watch.
	timer := func(written, seen func(r *runResult) []time.Duration) func(r *runResult) []time.Duration {
		if o.Audit {
			return written
		}
		return seen
	}
	how := " (seen by the bench's watch)"
	if o.Audit {
		how = ""
	}
	seenRows := func(seen, received func(r *runResult) []time.Duration) {
		if !o.Audit {
			return
		}
		row("… seen by the bench's watch, p50", lagFigure(seen, 50), " ms", 0, false)
		row("… seen by the bench's watch, p99", lagFigure(seen, 99), " ms", 0, false)
		row("… until the apiserver began handling the write, p99", lagFigure(received, 99), " ms", 0, false)
	}
	deadline := timer(func(r *runResult) []time.Duration { return r.DeadlineWritten }, func(r *runResult) []time.Duration { return r.DeadlineLag })
	row(fmt.Sprintf("Deadline: due to Failed/DeadlineExceeded written%s, p50 (%s deadlines of %ds)", how, count(o.Jobs), int(o.Deadline.Seconds())), lagFigure(deadline, 50), " ms", 0, false)
	row(fmt.Sprintf("Deadline: due to Failed/DeadlineExceeded written%s, p99", how), lagFigure(deadline, 99), " ms", 0, false)
	seenRows(func(r *runResult) []time.Duration { return r.DeadlineLag }, func(r *runResult) []time.Duration { return r.DeadlineReceived })
	kill := timer(func(r *runResult) []time.Duration { return r.KillWritten }, func(r *runResult) []time.Duration { return r.KillLag })
	row(fmt.Sprintf("Deadline to JobSet deleted (pods told to stop)%s, p50", how), lagFigure(kill, 50), " ms", 0, false)
	row(fmt.Sprintf("Deadline to JobSet deleted%s, p99", how), lagFigure(kill, 99), " ms", 0, false)
	seenRows(func(r *runResult) []time.Duration { return r.KillLag }, func(r *runResult) []time.Duration { return r.KillReceived })
	ran := func(r *runResult) bool { return r.Submit != 0 } // the deadline scenario ran
	row("Deadlines that never fired", func(r *runResult) (float64, bool) { return float64(r.DeadlineMissed), ran(r) }, "", 0, false)
	row("Deadlines due before the last JobSet existed (the figures above then include the creation work)", func(r *runResult) (float64, bool) {
		return float64(r.DueEarly), ran(r)
	}, "", 0, false)
	row("JobSets created again after the deadline deleted them", func(r *runResult) (float64, bool) { return float64(r.Recreated), ran(r) }, "", 0, false)
	ttl := timer(func(r *runResult) []time.Duration { return r.TTLWritten }, func(r *runResult) []time.Duration { return r.TTLLag })
	row(fmt.Sprintf("TTL: due to TrainJob deleted%s, p50 (%s of the failed ones, TTL %ds; upstream has no TTL)", how, count((o.Jobs+1)/2), int(o.TTL.Seconds())), lagFigure(ttl, 50), " ms", 0, false)
	row(fmt.Sprintf("TTL: due to TrainJob deleted%s, p99", how), lagFigure(ttl, 99), " ms", 0, false)
	seenRows(func(r *runResult) []time.Duration { return r.TTLLag }, func(r *runResult) []time.Duration { return r.TTLReceived })
	row("TTLs that never fired", func(r *runResult) (float64, bool) { return float64(r.TTLMissed), r.Trainer == kiln && r.Submit != 0 }, "", 0, false)
	adm := func(r *runResult) []time.Duration { return r.AdmissionLag }
	row(fmt.Sprintf("Kueue admission to JobSet running, p50 (%s queued TrainJobs)", count(o.QueuedJobs)), lagFigure(adm, 50), " ms", 0, false)
	row("Kueue admission to JobSet running, p99", lagFigure(adm, 99), " ms", 0, false)
	resume := func(r *runResult) []time.Duration { return r.ResumeLag }
	row("… of which the controller's: TrainJob resumed by Kueue to JobSet running, p50", lagFigure(resume, 50), " ms", 0, false)
	row("… of which the controller's, p99", lagFigure(resume, 99), " ms", 0, false)
	row("apiserver writes per TrainJob lifecycle (queued → complete)", func(r *runResult) (float64, bool) { return sumValues(r.Writes), r.Writes != nil }, "", 1, false)
	row("… of which stored (dry runs left out: Kueue's throwaway Workloads)", func(r *runResult) (float64, bool) { return storedWrites(r.Writes), r.Writes != nil }, "", 1, false)
	row(fmt.Sprintf("RSS with %s TrainJobs", count(o.MemoryJobs)), func(r *runResult) (float64, bool) { return float64(r.RSS) / (1 << 20), r.RSS != 0 }, " MiB", 0, false)
	row(fmt.Sprintf("Go heap in use with %s TrainJobs", count(o.MemoryJobs)), func(r *runResult) (float64, bool) { return float64(r.Heap) / (1 << 20), r.Heap != 0 }, " MiB", 0, false)
	row(fmt.Sprintf("Peak RSS from a restart to %s TrainJobs", count(o.MemoryJobs)), func(r *runResult) (float64, bool) { return float64(r.MemoryPeakRSS) / (1 << 20), r.MemoryPeakRSS != 0 }, " MiB", 0, false)
	timed := func(r *runResult) bool { return ran(r) || r.Writes != nil } // a timed scenario ran
	row("Peak RSS over the timed scenarios", func(r *runResult) (float64, bool) { return float64(r.PeakRSS) / (1 << 20), timed(r) }, " MiB", 0, false)
	row("CPU time over the timed scenarios", func(r *runResult) (float64, bool) { return r.CPU.Seconds(), timed(r) }, " s", 1, false)
	w("")
	w("Measured apart: Kiln's API server against direct Kubernetes calls in [benchmarks-api.md](benchmarks-api.md)")
	w("(`make bench-api`; with 50,000 TrainJobs in [benchmarks-api-scale.md](benchmarks-api-scale.md), `make bench-api-scale`),")
	w("gang jobs through Kueue with and without topology-aware scheduling in")
	w("[benchmarks-placement.md](benchmarks-placement.md) (`make bench-placement`), real pods on the real node in")
	w("[benchmarks-pods.md](benchmarks-pods.md) (`make bench-pods`), both controllers holding 50,000 TrainJobs in [benchmarks-scale.md](benchmarks-scale.md)")
	w("(`make bench-scale`). Where each figure stands against its")
	w("goal, where the time and the memory go, and what is next: [performance.md](performance.md).")
	w("")

	writeWritesByResource(w, o, results)
	writeWritesBy(w, results)
	writeDeadlineLoad(w, results)
	writeProgress(w, o, prog)

	dir := strings.TrimSuffix(o.Report, filepath.Ext(o.Report))
	plotted := false
	for _, pl := range []struct {
		file, title string
		f           func(r *runResult) []time.Duration
	}{
		{"deadline-lag.png", "Deadline: due instant to Failed/DeadlineExceeded", deadline},
		{"ttl-lag.png", "TTL: due instant to the TrainJob deleted", ttl},
		{"admission-lag.png", "Kueue: Workload admitted to JobSet running", adm},
	} {
		var ss []series
		for i, tr := range []string{kiln, up} {
			var all []time.Duration
			for _, r := range results {
				if r.Trainer == tr {
					all = append(all, pl.f(r)...)
				}
			}
			if len(all) > 0 {
				ss = append(ss, series{name: tr, color: palette[i], values: all})
			}
		}
		if len(ss) == 0 {
			continue
		}
		if !plotted {
			if err := os.MkdirAll(dir, 0o755); err != nil {
				return err
			}
			w("## Distributions")
			w("")
			plotted = true
		}
		if err := cdfPlot(filepath.Join(dir, pl.file), pl.title, ss); err != nil {
			return err
		}
		w("![%s](%s/%s)", pl.title, filepath.Base(dir), pl.file)
		w("")
	}

	w("## How each figure is measured")
	w("")
	if o.Audit {
		w("- The timers' actions (`Failed` written, the JobSet deleted, the TrainJob deleted) are timed to the instant the")
		w("  apiserver answered the write that carried each out, from its audit log of the deadline scenario's namespace:")
		w("  the first accepted status write whose body names `DeadlineExceeded`, the first accepted DELETE of the JobSet,")
		w("  of the TrainJob. Their rows \"seen by the bench's watch\" add the watch's delivery of that change to the bench")
		w("  on the same busy cores. \"Until the apiserver began handling the write\" is the audit log's")
		w("  `requestReceivedTimestamp`: the controller's wait for a worker and its client, and the wait of the request")
		w("  on the apiserver's connection until its handlers start, which on two saturated cores is the CPU's; the rest of")
		w("  the lag is the handling (flow control, admission, storage). Other instants of actions are when the bench's")
		w("  watch saw them; the same watch delay is in every controller's figure.")
	} else {
		w("- Instants of actions are when the bench's watch saw them; the same watch delay is in every controller's figure.")
	}
	w("  Due instants come from the API's whole-second timestamps, by each controller's own rule: Kiln's")
	w("  `status.startTime` + `activeDeadlineSeconds` and `status.completionTime` + `ttlSecondsAfterFinished`;")
	w("  upstream (no startTime) counts from the last `Suspended=False` transition, else from creation.")
	w("- Deadlines: %s running TrainJobs (pods that run for an hour) with `activeDeadlineSeconds: %d`, submitted at", count(o.Jobs), int(o.Deadline.Seconds()))
	w("  once by 32 writers, so that all of them are pending together and fall due within the submission window. Half")
	w("  of them carry `ttlSecondsAfterFinished: %d`: Kiln's TTL figure is from their failures to their deletions.", int(o.TTL.Seconds()))
	w("  The deadline is long enough for the JobSets to exist first on this machine (they took up to 92 s), so that")
	w("  the figures time the timers; when they do not, the first deadlines fall due while the controller still")
	w("  creates the last JobSets, and their figures include that work: a row counts them.")
	w("- Throughput: over the same submission, from the first create to the last of their JobSets seen (while the")
	w("  JobSet and Job controllers, the scheduler and KWOK start the pods of the first ones). The limit is a plain")
	w("  client with the controllers' budget creating %s copies of one of those JobSets, once per run.", count(o.Jobs))
	w("- Floor (`make bench`, not bench-quick): the throughput scenario's work with no controller in it, on Kiln's")
	w("  platform once the limit's pods are gone. The bench creates the same TrainJobs with the same 32 writers, through")
	w("  the same webhooks (Kiln's and Kueue's), managed by MultiKueue, which nothing on one cluster acts on; as each")
	w("  create returns, one of %d JobSet creators (the controllers' workers) creates its JobSet with a plain client and", o.Budget.Concurrency)
	w("  the controllers' budget. From the first create to the last JobSet seen: the least a controller behind those")
	w("  webhooks can take for the throughput figure here.")
	w("- Writes: every write request the apiserver answered while the Kueue scenario ran, over its TrainJobs; the")
	w("  by-writer table is the apiserver's audit log of that namespace (user agent, verb, resource, status code).")
	w("  Dry runs (`dryRun=All`, marked so) store nothing but cost the apiserver all the rest (admission, webhooks):")
	w("  Kueue creates a throwaway Workload that way at every reconcile of a TrainJob that compares its pod sets.")
	w("- Memory: the controller is restarted with a budget of %g QPS (burst %d) and %d TrainJobs in parallel, since", o.MemoryBudget.QPS, o.MemoryBudget.Burst, o.MemoryBudget.Concurrency)
	w("  this figure times nothing. The TrainJobs of the earlier scenarios (failed at their deadline, completed;")
	w("  Kiln's TTL has deleted half of its failed ones) are topped up to %s with new ones, half running and", count(o.MemoryJobs))
	w("  half suspended, on a copy of the runtime whose JobSets name another manager (`spec.managedBy`), so that the")
	w("  rest of the platform leaves them be and only the controller works. RSS is read from /proc once the controller")
	w("  has rendered them all, in %d of the runs; its peak includes the restart's initial list of everything.", min(o.MemoryRuns, o.Runs))
	w("- Peak RSS and CPU over the timed scenarios: the controller's (`VmHWM` and CPU time in /proc) from its start through")
	w("  the Kueue, deadline and limit scenarios, read before the floor, which is no controller's work.")
	w("")
	if err := saveReport(o.Report, b.String()); err != nil {
		return err
	}
	raw, err := json.MarshalIndent(struct {
		Runs     []*runResult
		Progress *progressResult
	}{results, prog}, "", "  ")
	if err != nil {
		return err
	}
	// Every sample, for whoever wants to look further (not committed: bin/ is ignored).
	return os.WriteFile(filepath.Join(o.Root, "bin", "bench", "results.json"), raw, 0o644)
}

// writeWritesByResource is the apiserver's writes of the Kueue scenario per TrainJob, by
// resource (only when the admission scenario ran).
func writeWritesByResource(w func(string, ...any), o Options, results []*runResult) {
	kiln, up := string(platform.TrainerKiln), string(platform.TrainerUpstream)
	resources := map[string]bool{}
	for _, r := range results {
		for k := range r.Writes {
			resources[k] = true
		}
	}
	if len(resources) == 0 {
		return
	}
	w("## Writes per TrainJob lifecycle, by resource")
	w("")
	w("From the apiserver's `apiserver_request_total` (POST, PUT, PATCH, APPLY, DELETE) over the Kueue scenario:")
	w("%s TrainJobs created suspended in a LocalQueue, admitted in waves, run and completed. They include every", count(o.QueuedJobs))
	w("component's writes (Kueue, JobSet, the Job controller, KWOK, the bench's own creates), so the difference between")
	w("the columns is the controllers'. Median over the runs.")
	w("")
	w("| resource | Kiln | upstream |")
	w("|---|---|---|")
	for _, res := range slices.Sorted(maps.Keys(resources)) {
		f := func(r *runResult) (float64, bool) { return r.Writes[res], r.Writes != nil }
		k, u := spreadOf(results, kiln, f), spreadOf(results, up, f)
		if k.median < 0.05 && u.median < 0.05 {
			continue
		}
		w("| %s | %.2f | %.2f |", res, k.median, u.median)
	}
	w("")
}

// writeWritesBy is the audited writes of the Kueue scenario per TrainJob, by writer,
// request and outcome (only when the bench ran with the audit log).
func writeWritesBy(w func(string, ...any), results []*runResult) {
	kiln, up := string(platform.TrainerKiln), string(platform.TrainerUpstream)
	keys := map[string]bool{}
	for _, r := range results {
		for k := range r.WritesBy {
			keys[k] = true
		}
	}
	if len(keys) == 0 {
		return
	}
	w("## Writes per TrainJob lifecycle, by writer")
	w("")
	w("From the apiserver's audit log over the same scenario, in the TrainJobs' namespace; an outcome other than ok is the")
	w("HTTP status of a rejected write (409: a conflict, or a create of what exists). Median over the runs.")
	w("")
	w("| writer | request | outcome | Kiln | upstream |")
	w("|---|---|---|---|---|")
	for _, k := range slices.Sorted(maps.Keys(keys)) {
		f := func(r *runResult) (float64, bool) { return r.WritesBy[k], r.WritesBy != nil }
		ks, us := spreadOf(results, kiln, f), spreadOf(results, up, f)
		if ks.median < 0.05 && us.median < 0.05 {
			continue
		}
		w("| %s | %.2f | %.2f |", strings.ReplaceAll(k, "\t", " | "), ks.median, us.median)
	}
	w("")
}

// count writes n with thousands separators.
func count(n int) string {
	s := fmt.Sprint(n)
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}

// machine describes this machine: CPU model, cores, memory.
// saveReport writes a suite's report to path, its directory made if need be.
func saveReport(path, text string) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	return os.WriteFile(path, []byte(text), 0o644)
}

// generatedBy is a report's first line: the make target that wrote it, when, how long
// it took, on which machine and Go.
func generatedBy(target string, started time.Time, took time.Duration) string {
	return fmt.Sprintf("Generated by `make %s` on %s (took %s). Machine: %s. Go %s.", target,
		started.UTC().Format("2006-01-02 15:04 MST"), took.Round(time.Second), machine(), strings.TrimPrefix(runtime.Version(), "go"))
}

func machine() string {
	fs, err := procfs.NewDefaultFS()
	if err != nil {
		return machineOf(nil)
	}
	return machineOf(&fs)
}

// machineOf leaves out what fs (nil: no /proc) cannot tell.
func machineOf(fs *procfs.FS) string {
	cpu, mem := "unknown CPU", ""
	if fs != nil {
		// Some CPUs pad their model name with spaces.
		if cpus, err := fs.CPUInfo(); err == nil && len(cpus) > 0 && strings.TrimSpace(cpus[0].ModelName) != "" {
			cpu = strings.TrimSpace(cpus[0].ModelName)
		}
		if mi, err := fs.Meminfo(); err == nil && mi.MemTotal != nil {
			mem = fmt.Sprintf(", %d GiB", (*mi.MemTotal+(1<<19))>>20) // kB, rounded
		}
	}
	return fmt.Sprintf("%s, %d cores%s, %s/%s", cpu, runtime.NumCPU(), mem, runtime.GOOS, runtime.GOARCH)
}

// writeProgress is the progress scenario's section (Kiln only).
func writeProgress(w func(string, ...any), o Options, p *progressResult) {
	if p == nil {
		return
	}
	load := float64(p.Duration) / float64(time.Second)
	ms := func(ds []time.Duration, q float64) string {
		if len(ds) == 0 {
			return "—"
		}
		d := stats.Percentile(ds, q)
		if d < 10*time.Millisecond {
			return fmt.Sprintf("%.1f ms", float64(d)/float64(time.Millisecond))
		}
		return fmt.Sprintf("%d ms", d.Round(time.Millisecond).Milliseconds())
	}
	refused := 0
	for _, n := range p.Refused {
		refused += n
	}
	w("## Progress reports: %s chatty trainers (Kiln only)", count(p.Jobs))
	w("")
	w("Kiln's status server on a fresh platform of its own, once: %s running TrainJobs whose trainers each post an", count(p.Jobs))
	w("`UpdateTrainJobStatusRequest` every %s for %s (step, total steps, loss, progress and ETA), each with a token", p.Interval, p.Duration)
	w("bound to its job's pod and audience, as the kubelet projects it. Upstream Kubeflow Trainer v2.3 serves its status")
	w("server only behind an alpha feature gate, so there is no upstream column. The operator runs with its defaults:")
	w("the status server writes through a client of its own (`--status-server-qps`, apart from the controllers' %g QPS),", o.Budget.QPS)
	w("each job's `status.trainerStatus` at most once per `--status-server-write-interval` (reports in between are")
	w("coalesced, the latest wins) and its history at most once per `--status-server-history-interval`.")
	w("")
	w("| figure | Kiln |")
	w("|---|---|")
	w("| Posts sent | %s |", count(p.Posts))
	w("| Posts accepted (200) | %s |", count(p.Accepted))
	w("| Accepted per second | %.0f |", float64(p.Accepted)/load)
	w("| Refused (any status but 200), never answered | %s, %s |", count(refused), count(p.Failed))
	w("| Post round trip, p50 / p99 | %s / %s |", ms(p.PostLatency, 50), ms(p.PostLatency, 99))
	w("| Post to its step visible in `status.trainerStatus` (the bench's watch), p50 | %s |", ms(p.Visible, 50))
	w("| Post to its step visible, p99 | %s |", ms(p.Visible, 99))
	w("| Accepted posts whose step never showed | %s |", count(p.NeverVisible))
	w("| `trainerStatus` writes seen per second during the load | %.0f |", float64(p.StatusUpdates)/load)
	w("| Jobs whose history (TrainJobMetrics) holds every accepted report | %s of %s, %s after the load |", count(p.HistoryComplete), count(p.Jobs), p.HistoryLag.Round(time.Second))
	w("| Operator CPU over the load | %.1f s (%.2f cores) |", p.OperatorCPU.Seconds(), p.OperatorCPU.Seconds()/load)
	w("| Operator peak RSS | %d MiB |", p.OperatorRSS>>20)
	w("| Deadline: due to Failed/DeadlineExceeded, p50, idle platform (%d deadlines of %ds) | %s |", p.TimerJobs, int(p.TimerDeadline.Seconds()), ms(p.IdleDeadline, 50))
	w("| Deadline p99, idle platform | %s |", ms(p.IdleDeadline, 99))
	w("| Deadline p50, falling due during the load | %s |", ms(p.LoadDeadline, 50))
	w("| Deadline p99, falling due during the load | %s |", ms(p.LoadDeadline, 99))
	w("| Deadlines that never fired, idle / under the load | %d / %d |", p.IdleMissed, p.LoadMissed)
	w("")
	if len(p.Errors) > 0 {
		w("Posts never answered failed with, for example (time since the trainer's first post):")
		w("")
		for _, e := range p.Errors {
			w("- `%s`", e)
		}
		w("")
	}
}
