// Package stats holds the figures the benchmarks and the chaos run report.
package stats

import (
	"slices"
	"time"
)

// Percentile is the p-th percentile (nearest rank) of ds; 0 when empty.
func Percentile(ds []time.Duration, p float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	i := int(float64(len(s))*p/100+0.5) - 1
	return s[min(max(i, 0), len(s)-1)]
}
