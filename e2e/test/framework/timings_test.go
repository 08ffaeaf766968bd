package framework

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/onsi/ginkgo/v2"
	"github.com/onsi/ginkgo/v2/types"
)

func TestPrintSpecTimesEndsWithEachFailure(t *testing.T) {
	r := ginkgo.Report{SuiteDescription: "suite", RunTime: time.Minute, SpecReports: types.SpecReports{
		{LeafNodeType: types.NodeTypeIt, LeafNodeText: "passes", State: types.SpecStatePassed, RunTime: time.Second},
		{LeafNodeType: types.NodeTypeIt, LeafNodeText: "fails", State: types.SpecStateFailed, RunTime: 5 * time.Minute,
			Failure: types.Failure{Message: "Timed out after 300s.\nconditions [Complete=False]",
				Location: types.CodeLocation{FileName: "dispatch_test.go", LineNumber: 87}}},
		{LeafNodeType: types.NodeTypeIt, LeafNodeText: "huge", State: types.SpecStateTimedout,
			Failure: types.Failure{Message: strings.Repeat("x", failureLimit+10)}},
	}}
	var b strings.Builder
	PrintSpecTimes(&b, r)
	out := b.String()
	for _, want := range []string{
		"suite: 3 specs ran",
		"FAILED fails\n  at dispatch_test.go:87\n  Timed out after 300s.\n  conditions [Complete=False]\n",
		"TIMEDOUT huge", "… (10 more bytes)",
		"Over 1m0s without saying why", "300.0s  fails",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("the report lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "PASSED passes") {
		t.Errorf("a passing spec is reported as a failure:\n%s", out)
	}
	if i, j := strings.Index(out, "passes"), strings.Index(out, "FAILED fails"); i < 0 || j < i {
		t.Errorf("the failures do not come after the times:\n%s", out)
	}
}

func TestPrintSpecTimesListsTheSlowestAndAcceptsASlowSpecThatSaysWhy(t *testing.T) {
	r := ginkgo.Report{SuiteDescription: "suite", RunTime: time.Hour}
	for i := range 25 {
		r.SpecReports = append(r.SpecReports, types.SpecReport{LeafNodeType: types.NodeTypeIt, LeafNodeText: fmt.Sprintf("spec %02d", i),
			State: types.SpecStatePassed, RunTime: time.Duration(i) * time.Second})
	}
	r.SpecReports = append(r.SpecReports, types.SpecReport{LeafNodeType: types.NodeTypeIt, LeafNodeText: "trains for real; slow: DDP on the real node",
		State: types.SpecStatePassed, RunTime: 2 * time.Minute})
	var b strings.Builder
	PrintSpecTimes(&b, r)
	out := b.String()
	if !strings.Contains(out, "26 specs ran") || !strings.Contains(out, "the 20 slowest") || !strings.Contains(out, "spec 24") || strings.Contains(out, "spec 05") {
		t.Errorf("want the 20 slowest of 26 listed:\n%s", out)
	}
	if strings.Contains(out, "without saying why") {
		t.Errorf("a slow spec that says why is listed as not saying it:\n%s", out)
	}
}

func TestReportSpecTimesWritesTheNamedFile(t *testing.T) {
	name := filepath.Join(t.TempDir(), "times.txt")
	t.Setenv(EnvSpecTimes, name)
	r := ginkgo.Report{SuiteDescription: "suite", SpecReports: types.SpecReports{
		{LeafNodeType: types.NodeTypeIt, LeafNodeText: "fails", State: types.SpecStateFailed, Failure: types.Failure{Message: "boom"}},
	}}
	if err := ReportSpecTimes(r); err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(got), "FAILED fails") || !strings.Contains(string(got), "boom") {
		t.Errorf("the file holds:\n%s", got)
	}
	t.Setenv(EnvSpecTimes, filepath.Join(t.TempDir(), "no-such-dir", "times.txt"))
	if err := ReportSpecTimes(r); err == nil || !strings.Contains(err.Error(), EnvSpecTimes) {
		t.Errorf("an unwritable file: %v, want an error naming %s", err, EnvSpecTimes)
	}
}
