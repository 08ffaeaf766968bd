package bench

import (
	"fmt"
	"os"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/kiln-ml/kiln/e2e/internal/platform"
)

// The load between two readings: requests per deadline, and cores as CPU time over the
// window; a process that restarted between the readings (another PID) is left out rather
// than counted from another process's CPU time.
func TestLoadBetween(t *testing.T) {
	t0 := time.Date(2026, 11, 30, 7, 0, 0, 0, time.UTC)
	a := loadReading{
		at:      t0,
		writes:  map[string]float64{"PATCH trainjobs/status": 100, "DELETE jobsets": 50},
		reads:   map[string]float64{"GET jobsets": 10},
		machine: 100 * time.Second,
		procs: map[string]procCPU{
			"kube-apiserver": {pid: 10, cpu: 30 * time.Second}, controllerProcess: {pid: 20, cpu: 5 * time.Second},
			"kueue": {pid: 30, cpu: 7 * time.Second},
		},
	}
	b := loadReading{
		at:      t0.Add(20 * time.Second),
		writes:  map[string]float64{"PATCH trainjobs/status": 1100, "DELETE jobsets": 1050, "POST events": 500},
		reads:   map[string]float64{"GET jobsets": 10},
		machine: 140 * time.Second,
		procs: map[string]procCPU{
			"kube-apiserver": {pid: 10, cpu: 52 * time.Second}, controllerProcess: {pid: 20, cpu: 9 * time.Second},
			"kueue": {pid: 31, cpu: 1 * time.Second}, // restarted
			"etcd":  {pid: 40, cpu: 3 * time.Second}, // appeared
		},
	}
	got := loadBetween(a, b, 1000)
	want := &deadlineLoad{
		Window:       20 * time.Second,
		Writes:       map[string]float64{"PATCH trainjobs/status": 1, "DELETE jobsets": 1, "POST events": 0.5},
		Reads:        map[string]float64{},
		MachineCores: 2,
		Cores:        map[string]float64{"kube-apiserver": 1.1, controllerProcess: 0.2},
	}
	if diff := cmp.Diff(want, got, cmp.Comparer(func(x, y float64) bool { return x-y < 1e-9 && y-x < 1e-9 })); diff != "" {
		t.Fatalf("loadBetween mismatch (-want +got):\n%s", diff)
	}
}

// The report's load section: the window, the requests per deadline with the ones that
// matter named (a key only one controller has counts 0 for the other), the cores of the
// machine and of each busy process, and the rest of the machine's.
func TestReportGivesTheLoadWhileTheDeadlinesFire(t *testing.T) {
	o := reportOptions(t)
	load := func(window time.Duration, patch, tiny, machine, apiserver, controller float64) *deadlineLoad {
		return &deadlineLoad{
			Window:       window,
			Writes:       map[string]float64{"PATCH trainjobs/status": patch, "DELETE jobsets": 1, "POST events": tiny},
			Reads:        map[string]float64{"GET jobsets": 0.5},
			Cores:        map[string]float64{"kube-apiserver": apiserver, controllerProcess: controller, "kwok-controller": 0.01},
			MachineCores: machine,
		}
	}
	kiln, up := string(platform.TrainerKiln), string(platform.TrainerUpstream)
	results := []*runResult{
		{Trainer: kiln, Run: 1, DeadlineLoad: load(20*time.Second, 1.1, 0.05, 1.9, 1.0, 0.2)},
		{Trainer: kiln, Run: 2, DeadlineLoad: load(22*time.Second, 1.0, 0.05, 2.0, 1.1, 0.3)},
		{Trainer: kiln, Run: 3, DeadlineLoad: load(25*time.Second, 1.2, 0.05, 1.8, 1.2, 0.1)},
		{Trainer: up, Run: 1, DeadlineLoad: load(70*time.Second, 1.0, 0.05, 1.0, 0.5, 0.3)},
		{Trainer: up, Run: 2}, // its deadline scenario read no load
	}
	if err := writeReport(o, results, nil, time.Now(), time.Minute); err != nil {
		t.Fatal(err)
	}
	reportHas(t, o.Report,
		"## While the deadlines fire",
		"| the window | 22 s (20–25) | 70 s |",
		"| the apiserver's writes per deadline | 2.15 (2.05–2.25) | 2.05 |",
		"| … `PATCH trainjobs/status` | 1.10 (1.00–1.20) | 1.00 |\n| … `DELETE jobsets` | 1.00 | 1.00 |",
		"| the apiserver's reads per deadline | 0.50 | 0.50 |",
		fmt.Sprintf("| cores busy, the whole machine (of %d) | 1.90 (1.80–2.00) | 1.00 |", runtime.NumCPU()),
		"| … kube-apiserver | 1.10 (1.00–1.20) | 0.50 |\n| … the controller | 0.20 (0.10–0.30) | 0.30 |\n| … the rest",
		"| … the rest (the kernel, the platform's smaller processes, others) | 0.60 (0.50–0.70) | 0.20 |",
	)
	raw, err := os.ReadFile(o.Report)
	if err != nil {
		t.Fatal(err)
	}
	for _, left := range []string{"POST events", "kwok-controller"} {
		if strings.Contains(string(raw), left) {
			t.Errorf("the report names %s, under its threshold", left)
		}
	}
}
