package framework

import (
	"cmp"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/onsi/ginkgo/v2"
	"github.com/onsi/ginkgo/v2/types"
)

// PrintSpecTimes writes where a suite's time went: every spec that ran, longest first,
// with its labels and outcome, then the totals. Suites call it from ReportAfterSuite, so
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
	fmt.Fprintf(w, "\n%s: %d specs ran in %s (%s in specs, the rest in suite setup and cleanup)\n",
		r.SuiteDescription, len(rows), r.RunTime.Round(time.Second), inSpecs.Round(time.Second))
	for _, x := range rows {
		labels := ""
		if len(x.labels) > 0 {
			labels = " [" + strings.Join(x.labels, ",") + "]"
		}
		fmt.Fprintf(w, "%7.1fs  %-7s %s%s\n", x.d.Seconds(), x.state, x.name, labels)
	}
}
