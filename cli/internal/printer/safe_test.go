package printer

import "testing"

func TestSafe(t *testing.T) {
	for in, want := range map[string]string{
		"loss":             "loss",
		"ünïcode ✓ 損失":     "ünïcode ✓ 損失",
		"\x1b]0;title\x07": `\x1b]0;title\x07`,
		"a\nb\rc\td":       `a\nb\rc\td`,
		"\x9b2J":           `\x9b2J`,
		"abc\u202edcba":    `abc\u202edcba`,
		"del\x7f":          `del\x7f`,
	} {
		if got := Safe(in); got != want {
			t.Errorf("Safe(%q) = %q, want %q", in, got, want)
		}
	}
}
