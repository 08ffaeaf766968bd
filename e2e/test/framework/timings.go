package framework

import (
	"cmp"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/onsi/ginkgo/v2"
	"github.com/onsi/ginkgo/v2/types"
)

// EnvSpecTimes names the file a suite's spec times go to (the Makefile's e2e targets set it
// and print the file after the platform's shutdown, at the end of the log); unset, they go
// to standard output. In parallel runs ginkgo keeps a passing suite's output to itself.
const EnvSpecTimes = "KILN_E2E_TIMES"

// ReportSpecTimes writes PrintSpecTimes's report where EnvSpecTimes says.
func ReportSpecTimes(r ginkgo.Report) error {
	name := os.Getenv(EnvSpecTimes)
	if name == "" {
		PrintSpecTimes(os.Stdout, r)
		return nil
	}
	f, err := os.Create(name)
	if err != nil {
		return fmt.Errorf("writing the spec times (%s): %w", EnvSpecTimes, err)
	}
	PrintSpecTimes(f, r)
	return f.Close()
}

// SlowSpec is how long a spec may take without saying why ("slow: <reason>" in its text):
// the suites' time is CI's budget.
const SlowSpec = time.Minute

// slowestShown is how many of the slowest specs the report lists.
const slowestShown = 20

// PrintSpecTimes writes where a suite's time went: the totals, the 20 slowest specs with
// their labels and outcome, those over SlowSpec that do not say why, then the failures. Suites call it from ReportAfterSuite, so
// CI's log shows which spec to look at when the budget tightens.
func PrintSpecTimes(w io.Writer, r ginkgo.Report) {
	type row struct {
		name   string
		labels []string
		state  types.SpecState
		d      time.Duration
	}
	var rows []row
	var inSpecs time.Duration
	for _, s := range r.SpecReports {
		if s.LeafNodeType != types.NodeTypeIt || s.State == types.SpecStateSkipped || s.State == types.SpecStatePending {
			continue
		}
		rows = append(rows, row{s.FullText(), s.Labels(), s.State, s.RunTime})
		inSpecs += s.RunTime
	}
	slices.SortFunc(rows, func(a, b row) int { return cmp.Compare(b.d, a.d) })
	fmt.Fprintf(w, "\n%s: %d specs ran in %s (%s in specs, the rest in suite setup and cleanup); the %d slowest:\n",
		r.SuiteDescription, len(rows), r.RunTime.Round(time.Second), inSpecs.Round(time.Second), min(len(rows), slowestShown))
	var unexplained []string
	for i, x := range rows {
		if x.d > SlowSpec && !strings.Contains(strings.ToLower(x.name), "slow:") {
			unexplained = append(unexplained, fmt.Sprintf("%7.1fs  %s", x.d.Seconds(), x.name))
		}
		if i >= slowestShown {
			continue
		}
		labels := ""
		if len(x.labels) > 0 {
			labels = " [" + strings.Join(x.labels, ",") + "]"
		}
		fmt.Fprintf(w, "%7.1fs  %-7s %s%s\n", x.d.Seconds(), x.state, x.name, labels)
	}
	if len(unexplained) > 0 {
		fmt.Fprintf(w, "\nOver %s without saying why (put \"slow: <reason>\" in the spec's description, or make it faster):\n%s\n",
			SlowSpec, strings.Join(unexplained, "\n"))
	}
	printFailures(w, r)
}

// failureLimit bounds one failure's message in the summary: a Gomega message can quote a
// whole object list, and the summary is read at the end of a long CI log.
const failureLimit = 3000

// printFailures writes each failed spec's message and where it failed: the last lines of
// a CI log are the ones a reader sees, and ginkgo's own summary gives only the location.
func printFailures(w io.Writer, r ginkgo.Report) {
	for _, s := range r.SpecReports {
		if !s.State.Is(types.SpecStateFailureStates) {
			continue
		}
		msg := strings.TrimSpace(s.Failure.Message)
		if len(msg) > failureLimit {
			msg = msg[:failureLimit] + fmt.Sprintf(" … (%d more bytes)", len(msg)-failureLimit)
		}
		fmt.Fprintf(w, "\n%s %s\n  at %s\n  %s\n", strings.ToUpper(s.State.String()), s.FullText(), s.Failure.Location,
			strings.ReplaceAll(msg, "\n", "\n  "))
	}
}

// PrintConformanceReport writes the conformance suite's report, the check an admin reads
// after an install or upgrade: what was checked against which cluster and release, each
// check's outcome (why it was skipped, where it failed and with what message), and the
// verdict.
func PrintConformanceReport(w io.Writer, r ginkgo.Report) {
	fmt.Fprintf(w, "\nKiln conformance report (%s)\n", time.Now().UTC().Format(time.RFC3339))
	seen := map[string]bool{}
	var passed, failed, skipped int
	for _, s := range r.SpecReports {
		for _, e := range s.ReportEntries {
			if line := fmt.Sprintf("  %s: %s", e.Name, e.StringRepresentation()); !seen[line] {
				seen[line] = true
				fmt.Fprintln(w, line)
			}
		}
	}
	for _, s := range r.SpecReports {
		if s.LeafNodeType != types.NodeTypeIt || (s.State == types.SpecStateSkipped && s.Failure.Message == "") {
			continue
		}
		switch s.State {
		case types.SpecStatePassed:
			passed++
			fmt.Fprintf(w, "  PASS  %6.1fs  %s\n", s.RunTime.Seconds(), s.FullText())
		case types.SpecStateSkipped:
			skipped++
			fmt.Fprintf(w, "  SKIP  %6.1fs  %s\n          %s\n", s.RunTime.Seconds(), s.FullText(), s.Failure.Message)
		default:
			failed++
			fmt.Fprintf(w, "  FAIL  %6.1fs  %s\n          %s\n          at %s\n", s.RunTime.Seconds(), s.FullText(),
				strings.ReplaceAll(strings.TrimSpace(s.Failure.Message), "\n", "\n          "), s.Failure.Location)
		}
	}
	verdict := "CONFORMANT"
	if failed > 0 || passed == 0 {
		verdict = "NOT CONFORMANT"
	}
	fmt.Fprintf(w, "%s: %d passed, %d failed, %d skipped, in %s\n", verdict, passed, failed, skipped, r.RunTime.Round(time.Second))
}
