package bench

import (
	"cmp"
	"context"
	"fmt"
	"maps"
	"os"
	"runtime"
	"slices"
	"strings"
	"time"

	"github.com/prometheus/procfs"
	"k8s.io/apimachinery/pkg/types"

	"github.com/kiln-ml/kiln/e2e/internal/platform"
	"github.com/kiln-ml/kiln/e2e/internal/stats"
)

// deadlineLoad is what loaded the machine while the deadlines fired: from a second before
// the first fell due until the bench had seen every one fail. It is the measured reason
// behind the deadline figures: the Failed writes and the JobSet deletions wait for the same
// two cores as the garbage collector's cascade and the rest of the platform.
type deadlineLoad struct {
	Window time.Duration
	// Writes and Reads are the apiserver's requests per deadline by "VERB resource[/sub]"
	// (a refusal followed by its code), counted by the apiserver itself.
	Writes, Reads map[string]float64
	// MachineCores is the cores the whole machine was busy over the window (all but idle
	// and I/O wait); Cores each platform process's, by its name (the controller under
	// controllerProcess, whichever it is).
	MachineCores float64
	Cores        map[string]float64
}

// controllerProcess names the controller's process (Kiln's operator or upstream's
// controller manager) among deadlineLoad.Cores; benchProcess the bench's own.
const (
	controllerProcess = "the controller"
	benchProcess      = "the bench"
)

// loadReading is one reading of what loads the machine.
type loadReading struct {
	at            time.Time
	writes, reads map[string]float64
	machine       time.Duration
	procs         map[string]procCPU
}

type procCPU struct {
	pid int
	cpu time.Duration
}

// readLoad reads the apiserver's request counts, the machine's busy CPU time and each
// platform process's CPU time.
func (e *env) readLoad(ctx context.Context) (loadReading, error) {
	raw, err := apiserverMetrics(ctx, e.cfg)
	if err != nil {
		return loadReading{}, err
	}
	fs, err := procfs.NewDefaultFS()
	if err != nil {
		return loadReading{}, fmt.Errorf("opening /proc: %w", err)
	}
	st, err := fs.Stat()
	if err != nil {
		return loadReading{}, fmt.Errorf("reading /proc/stat: %w", err)
	}
	t := st.CPUTotal
	l := loadReading{
		at:      time.Now(),
		writes:  parseRequestCounts(raw, writeVerbs, true),
		reads:   parseRequestCounts(raw, readVerbs, true),
		machine: time.Duration((t.User + t.Nice + t.System + t.IRQ + t.SoftIRQ + t.Steal) * float64(time.Second)),
		procs:   map[string]procCPU{},
	}
	pids := e.p.ProcessPIDs()
	pids[benchProcess] = os.Getpid()
	for name, pid := range pids {
		if name == e.p.TrainerProcess().Name {
			name = controllerProcess
		}
		if u, err := procUsageOf(fs, pid); err == nil { // a process gone meanwhile is left out
			l.procs[name] = procCPU{pid: pid, cpu: u.cpu}
		}
	}
	return l, nil
}

// loadBetween is the load from reading a to reading b, n deadlines having fired between.
// A process that restarted in between (another PID) is left out.
func loadBetween(a, b loadReading, n int) *deadlineLoad {
	l := &deadlineLoad{
		Window: b.at.Sub(a.at),
		Writes: perDeadline(a.writes, b.writes, n),
		Reads:  perDeadline(a.reads, b.reads, n),
		Cores:  map[string]float64{},
	}
	secs := l.Window.Seconds()
	if secs <= 0 {
		return l
	}
	l.MachineCores = (b.machine - a.machine).Seconds() / secs
	for name, pb := range b.procs {
		if pa, ok := a.procs[name]; ok && pa.pid == pb.pid {
			l.Cores[name] = (pb.cpu - pa.cpu).Seconds() / secs
		}
	}
	return l
}

// loadWhileDeadlinesFire reads the load (call it a second before the first of n deadlines
// falls due); the function it returns reads it again once every deadline was seen, logs it
// and returns it. A reading that fails is logged and gives no load: it is for diagnosis.
func (e *env) loadWhileDeadlinesFire(ctx context.Context, n int) func() *deadlineLoad {
	before, err := e.readLoad(ctx)
	if err != nil {
		e.logf("deadline: the load while the deadlines fire: %v", err)
		return func() *deadlineLoad { return nil }
	}
	seconds := e.loadBySecond(ctx, before)
	return func() *deadlineLoad {
		seconds()
		after, err := e.readLoad(ctx)
		if err != nil {
			e.logf("deadline: the load while the deadlines fire: %v", err)
			return nil
		}
		l := loadBetween(before, after, n)
		took := l.Window.Round(100 * time.Millisecond)
		e.logf("deadline: the apiserver's writes over the %s the deadlines took to fire: %s", took, mostFirst(l.Writes, "%.2f", " per deadline"))
		e.logf("deadline: the apiserver's reads over the same: %s", mostFirst(l.Reads, "%.2f", " per deadline"))
		e.logf("deadline: cores busy over the same: the machine %.2f of %d; %s", l.MachineCores, runtime.NumCPU(), mostFirst(l.Cores, "%.2f", " in the platform's processes"))
		return l
	}
}

// loadBySecond reads the load every second from before on, when profiles are asked for
// (--profiles: reading the apiserver's metrics each second loads it too); the function it
// returns stops and logs each interval's: the apiserver's writes (the most of them first) and
// the cores busy, from the first deadline's due instant (before is read a second earlier).
// A reading under load takes a while and the ticker drops the ticks it misses, so the
// readings are not a second apart (docs/performance.md, "The bench tells more"): each line
// gives the rates over its own interval.
func (e *env) loadBySecond(ctx context.Context, before loadReading) func() {
	if e.o.Profiles == "" {
		return func() {}
	}
	stop, done := make(chan struct{}), make(chan []loadReading, 1)
	go func() {
		readings := []loadReading{before}
		t := time.NewTicker(time.Second)
		defer t.Stop()
		for {
			select {
			case <-stop:
				done <- readings
				return
			case <-t.C:
				if l, err := e.readLoad(ctx); err == nil {
					readings = append(readings, l)
				}
			}
		}
	}()
	return func() {
		close(stop)
		readings := <-done
		for i := 1; i < len(readings); i++ {
			a, b := readings[i-1], readings[i]
			l := loadBetween(a, b, 1) // the writes in the interval, not per deadline
			secs := l.Window.Seconds()
			top := maps.Collect(func(yield func(string, float64) bool) {
				for k, v := range l.Writes {
					if v/secs >= 10 && !yield(k, v/secs) {
						return
					}
				}
			})
			// mostFirst's total is of those listed: the writes of 10 or more a second.
			e.logf("deadline: from %+.1fs for %.1fs: apiserver %.2f cores, the controller %.2f, kube-controller-manager %.2f, the machine %.2f; writes %.0f a second, of which %s",
				(a.at.Sub(before.at) - time.Second).Seconds(), l.Window.Seconds(), l.Cores["kube-apiserver"], l.Cores[controllerProcess],
				l.Cores["kube-controller-manager"], l.MachineCores, sumValues(l.Writes)/secs, mostFirst(top, "%.0f", " in those of 10 or more a second"))
		}
	}
}

// perDeadline is the requests between two readings, per deadline, by key: only what moved.
func perDeadline(before, after map[string]float64, n int) map[string]float64 {
	out := map[string]float64{}
	for k, v := range after {
		if d := v - before[k]; d > 0 {
			out[k] = d / float64(n)
		}
	}
	return out
}

// mostFirst writes counts as their total (followed by totalSuffix), then each, the most
// first (ties by name).
func mostFirst(counts map[string]float64, format, totalSuffix string) string {
	keys := slices.SortedFunc(maps.Keys(counts), func(a, b string) int {
		if counts[a] != counts[b] {
			return cmp.Compare(counts[b], counts[a])
		}
		return strings.Compare(a, b)
	})
	parts := []string{fmt.Sprintf(format, sumValues(counts)) + totalSuffix}
	for _, k := range keys {
		parts = append(parts, k+" "+fmt.Sprintf(format, counts[k]))
	}
	return strings.Join(parts, ", ")
}

// writeDeadlineLoad is the deadline scenario's load, per controller (only when it was read).
func writeDeadlineLoad(w func(string, ...any), results []*runResult) {
	kiln, up := string(platform.TrainerKiln), string(platform.TrainerUpstream)
	if !slices.ContainsFunc(results, func(r *runResult) bool { return r.DeadlineLoad != nil }) {
		return
	}
	of := func(f func(l *deadlineLoad) float64) figure {
		return func(r *runResult) (float64, bool) {
			if r.DeadlineLoad == nil {
				return 0, false
			}
			return f(r.DeadlineLoad), true
		}
	}
	// keys of the maps m gives whose median is at least least for either controller,
	// Kiln's most first.
	keys := func(m func(l *deadlineLoad) map[string]float64, least float64) []string {
		all := map[string]bool{}
		for _, r := range results {
			if r.DeadlineLoad != nil {
				for k := range m(r.DeadlineLoad) {
					all[k] = true
				}
			}
		}
		median := map[string][2]float64{}
		var out []string
		for k := range all {
			f := of(func(l *deadlineLoad) float64 { return m(l)[k] })
			ks, us := spreadOf(results, kiln, f), spreadOf(results, up, f)
			if ks.median >= least || us.median >= least {
				median[k] = [2]float64{ks.median, us.median}
				out = append(out, k)
			}
		}
		slices.SortFunc(out, func(a, b string) int {
			if c := cmp.Compare(median[b][0], median[a][0]); c != 0 {
				return c
			}
			if c := cmp.Compare(median[b][1], median[a][1]); c != 0 {
				return c
			}
			return strings.Compare(a, b)
		})
		return out
	}
	row := func(name string, f func(l *deadlineLoad) float64, unit string, decimals int) {
		k, u := spreadOf(results, kiln, of(f)), spreadOf(results, up, of(f))
		w("| %s | %s | %s |", name, k.String(unit, decimals), u.String(unit, decimals))
	}
	w("## While the deadlines fire")
	w("")
	w("From a second before the first deadline falls due until the bench has seen every one fail: the apiserver's")
	w("requests per deadline (its `apiserver_request_total`: every component's, by verb and resource, a refusal")
	w("followed by its code; those under 0.1 per deadline left out) and the cores each process kept busy (from")
	w("/proc; under 0.02 left out). The `Failed` writes and the JobSet deletions wait for these cores with the rest.")
	w("Upstream's deadlines fire over a longer window, so its load is spread over more time. Median over the runs (min–max).")
	w("")
	w("| over the window | Kiln | upstream |")
	w("|---|---|---|")
	row("the window", func(l *deadlineLoad) float64 { return l.Window.Seconds() }, " s", 1)
	for _, kind := range []struct {
		name string
		m    func(l *deadlineLoad) map[string]float64
	}{
		{"writes", func(l *deadlineLoad) map[string]float64 { return l.Writes }},
		{"reads", func(l *deadlineLoad) map[string]float64 { return l.Reads }},
	} {
		row("the apiserver's "+kind.name+" per deadline", func(l *deadlineLoad) float64 { return sumValues(kind.m(l)) }, "", 2)
		for _, k := range keys(kind.m, 0.1) {
			row("… `"+k+"`", func(l *deadlineLoad) float64 { return kind.m(l)[k] }, "", 2)
		}
	}
	row(fmt.Sprintf("cores busy, the whole machine (of %d)", runtime.NumCPU()), func(l *deadlineLoad) float64 { return l.MachineCores }, "", 2)
	listed := keys(func(l *deadlineLoad) map[string]float64 { return l.Cores }, 0.02)
	for _, k := range listed {
		row("… "+k, func(l *deadlineLoad) float64 { return l.Cores[k] }, "", 2)
	}
	row("… the rest (the kernel, the platform's smaller processes, others)", func(l *deadlineLoad) float64 {
		rest := l.MachineCores
		for _, k := range listed {
			rest -= l.Cores[k]
		}
		return max(0, rest)
	}, "", 2)
	w("")
}

// timersWritten reads from the apiserver's audit log when it began handling and answered
// the writes that carried out the deadlines and TTLs of namespace ns, and logs both, second
// by second of their due instants.
func (e *env) timersWritten(r *runResult, ns string) error {
	at, err := auditedTimersIn(e.p.AuditLogFile(), ns)
	if err != nil {
		return err
	}
	t := e.tracker
	r.DeadlineWritten, r.DeadlineReceived = t.lags(at.failed, t.deadlineDue, ns), t.lags(at.failedReceived, t.deadlineDue, ns)
	r.KillWritten, r.KillReceived = t.lags(at.jobSetDeleted, t.deadlineDue, ns), t.lags(at.jobSetDeletedReceived, t.deadlineDue, ns)
	r.TTLWritten, r.TTLReceived = t.lags(at.deleted, t.ttlDue, ns), t.lags(at.deletedReceived, t.ttlDue, ns)
	for _, w := range []struct {
		what               string
		answered, received map[types.NamespacedName]time.Time
		due                map[types.NamespacedName]time.Time
		written, begun     []time.Duration
	}{
		{"Failed written", at.failed, at.failedReceived, t.deadlineDue, r.DeadlineWritten, r.DeadlineReceived},
		{"JobSet deleted", at.jobSetDeleted, at.jobSetDeletedReceived, t.deadlineDue, r.KillWritten, r.KillReceived},
		{"TTL: TrainJob deleted", at.deleted, at.deletedReceived, t.ttlDue, r.TTLWritten, r.TTLReceived},
	} {
		if len(w.written) == 0 {
			continue // upstream has no TTL
		}
		e.logf("timers, as the apiserver's audit log has them: due to %s p50 %s, p99 %s (%d); due to its handling begun p50 %s, p99 %s",
			w.what, stats.Percentile(w.written, 50), stats.Percentile(w.written, 99), len(w.written),
			stats.Percentile(w.begun, 50), stats.Percentile(w.begun, 99))
		e.logf("timers, %s by the second it fell due in, written (handling begun): %s; (%s)", w.what,
			formatByDue(t.lagsByDue(w.answered, w.due, ns)), formatByDue(t.lagsByDue(w.received, w.due, ns)))
	}
	return nil
}
