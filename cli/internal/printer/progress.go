package printer

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	kilnv1 "github.com/kiln-ml/kiln/api/gen/kiln/v1"
)

// MetricLoss is the metric tables and `kiln describe` show of a job's training: the one
// every trainer reports, under this name by convention (Hugging Face's, the SDK's helper).
const MetricLoss = "loss"

// ProgressCell is a job's progress as a table shows it: "42%"; "step 1200" for a trainer
// that counts steps but does not know how many there will be; "-" until it reports.
func ProgressCell(p *kilnv1.Progress) string {
	switch {
	case p == nil:
		return "-"
	case p.Percent != nil:
		return fmt.Sprintf("%d%%", p.GetPercent())
	case p.Step != nil:
		return fmt.Sprintf("step %d", p.GetStep())
	}
	return "-"
}

// ETACell is the time the trainer estimates a running job has left ("-" otherwise): an
// estimate left over from before the job stopped running would mislead.
func ETACell(j *kilnv1.TrainJob) string {
	p := j.GetStatus().GetProgress()
	if j.GetStatus().GetState() != kilnv1.State_STATE_RUNNING || p == nil || p.EtaSeconds == nil {
		return "-"
	}
	return Remaining(time.Duration(p.GetEtaSeconds()) * time.Second)
}

// Remaining is a time left in its two largest units (42s, 5m10s, 2h3m, 3d4h): an ETA
// rounded to whole minutes or hours, as Duration does, would sit still for an hour.
func Remaining(d time.Duration) string {
	d = max(d, 0).Round(time.Second)
	two := func(big int, bigUnit string, small int, smallUnit string) string {
		if small == 0 {
			return fmt.Sprintf("%d%s", big, bigUnit)
		}
		return fmt.Sprintf("%d%s%d%s", big, bigUnit, small, smallUnit)
	}
	switch s := int(d.Seconds()); {
	case d < time.Minute:
		return fmt.Sprintf("%ds", s)
	case d < time.Hour:
		return two(s/60, "m", s%60, "s")
	case d < 24*time.Hour:
		return two(s/3600, "h", s/60%60, "m")
	default:
		return two(s/86400, "d", s/3600%24, "h")
	}
}

// Metric is the latest value the trainer reported for a metric, as reported.
func Metric(p *kilnv1.Progress, name string) (string, bool) {
	for _, m := range p.GetMetrics() {
		if m.GetName() == name {
			return m.GetValue(), true
		}
	}
	return "", false
}

// Number is a metric's value shortened for a column: 4 significant digits when it is a
// number (a loss reported as 0.5321098741 reads 0.5321), else as reported.
func Number(v string) string {
	f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
	if err != nil {
		return v
	}
	return Float(f)
}

// Float is a value of a metric with 4 significant digits.
func Float(f float64) string {
	return strconv.FormatFloat(f, 'g', 4, 64)
}

// Bar is a progress bar of percent, width characters between its brackets:
// [#########-----------]. ASCII, so that it reads the same in a log.
func Bar(percent int32, width int) string {
	done := int(math.Round(float64(min(max(percent, 0), 100)) * float64(width) / 100))
	return "[" + strings.Repeat("#", done) + strings.Repeat("-", width-done) + "]"
}

// sparks are the eight heights of a sparkline, lowest first.
var sparks = []rune("▁▂▃▄▅▆▇█")

// Sparkline draws values as a line of block characters, at most width of them: more
// values than that are resampled, each character the mean of its share of them. The
// lowest value is ▁, the highest █; values that do not vary are all ▁. Values that are
// not finite (a NaN loss) are left out.
func Sparkline(values []float64, width int) string {
	var vs []float64
	for _, v := range values {
		if !math.IsNaN(v) && !math.IsInf(v, 0) {
			vs = append(vs, v)
		}
	}
	vs = resample(vs, width)
	if len(vs) == 0 {
		return ""
	}
	lo, hi := vs[0], vs[0]
	for _, v := range vs {
		lo, hi = min(lo, v), max(hi, v)
	}
	var b strings.Builder
	for _, v := range vs {
		i := 0
		if hi > lo {
			i = int(math.Round((v - lo) / (hi - lo) * float64(len(sparks)-1)))
		}
		b.WriteRune(sparks[i])
	}
	return b.String()
}

// resample averages vs into at most n buckets of (nearly) equal size, in order.
func resample(vs []float64, n int) []float64 {
	if len(vs) <= n || n <= 0 {
		return vs
	}
	out := make([]float64, n)
	for i := range n {
		from, to := i*len(vs)/n, (i+1)*len(vs)/n
		sum := 0.0
		for _, v := range vs[from:to] {
			sum += v
		}
		out[i] = sum / float64(to-from)
	}
	return out
}
