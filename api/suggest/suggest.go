// Package suggest finds, among the names that exist, the one a user most likely meant when
// they typed a name that does not: the "did you mean" of every refusal and warning that
// names a runtime, a queue or a flag value.
package suggest

import (
	"fmt"
	"slices"
	"strings"
)

// Closest is the candidate nearest to name by edit distance (insertions, deletions,
// substitutions and swaps of neighbours, case ignored), or "" when none is near enough to
// be a typo: at most a third of the longer name's characters differ (at least 1, at most 3).
// A candidate that starts with name, or that name starts with, also counts (torch for
// torch-distributed). Ties go to the first in sorted order, so the answer is stable.
func Closest(name string, candidates []string) string {
	if name == "" {
		return ""
	}
	sorted := slices.Clone(candidates)
	slices.Sort(sorted)
	best, bestDist := "", -1
	lower := strings.ToLower(name)
	for _, c := range sorted {
		if c == name || c == "" {
			continue
		}
		lc := strings.ToLower(c)
		d := distance(lower, lc)
		limit := min(3, max(1, max(len(lower), len(lc))/3))
		prefix := len(lower) >= 3 && (strings.HasPrefix(lc, lower) || strings.HasPrefix(lower, lc))
		if d > limit && !prefix {
			continue
		}
		if prefix && d > limit {
			d = limit + 1 // a prefix match ranks after every typo
		}
		if bestDist < 0 || d < bestDist {
			best, bestDist = c, d
		}
	}
	return best
}

// DidYouMean is ` (did you mean "x"?)` for the closest candidate, or "" when none is close.
func DidYouMean(name string, candidates []string) string {
	if c := Closest(name, candidates); c != "" {
		return fmt.Sprintf(" (did you mean %q?)", c)
	}
	return ""
}

// List names the candidates for a message, sorted and quoted, at most max of them
// ("a", "b" and 3 more); "none" when there are none.
func List(candidates []string, most int) string {
	if len(candidates) == 0 {
		return "none"
	}
	sorted := slices.Clone(candidates)
	slices.Sort(sorted)
	sorted = slices.Compact(sorted)
	shown := sorted[:min(len(sorted), most)]
	quoted := make([]string, len(shown))
	for i, s := range shown {
		quoted[i] = fmt.Sprintf("%q", s)
	}
	out := strings.Join(quoted, ", ")
	if rest := len(sorted) - len(shown); rest > 0 {
		out += fmt.Sprintf(" and %d more", rest)
	}
	return out
}

// distance is the optimal string alignment distance between a and b (Damerau-Levenshtein
// without repeated edits of one substring), over runes.
func distance(a, b string) int {
	ra, rb := []rune(a), []rune(b)
	prev2 := make([]int, len(rb)+1)
	prev := make([]int, len(rb)+1)
	cur := make([]int, len(rb)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(ra); i++ {
		cur[0] = i
		for j := 1; j <= len(rb); j++ {
			cost := 1
			if ra[i-1] == rb[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
			if i > 1 && j > 1 && ra[i-1] == rb[j-2] && ra[i-2] == rb[j-1] {
				cur[j] = min(cur[j], prev2[j-2]+1)
			}
		}
		prev2, prev, cur = prev, cur, prev2
	}
	return prev[len(rb)]
}
