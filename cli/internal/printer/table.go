// Package printer writes what the CLI shows: tables, durations, states, and the API's
// messages as JSON or YAML.
package printer

import (
	"fmt"
	"io"
	"strings"
	"unicode/utf8"

	"github.com/kiln-ml/kiln/cli/internal/iostreams"
)

// Table prints rows: on a terminal as aligned columns under a header, the widest
// column truncated to fit, but never a name (NAME, NAMESPACE, STEP...: what people copy
// into the next command); in a pipe as tab-separated lines without header or truncation,
// so scripts can cut and awk them.
type Table struct {
	io      *iostreams.IOStreams
	header  []string
	rows    [][]cell
	aligned bool
}

// Aligned makes the table aligned under its header in a pipe too (for text meant for
// people, such as `kiln describe`); it is never truncated there.
func (t *Table) Aligned() *Table {
	t.aligned = true
	return t
}

type cell struct {
	text  string
	color func(string) string
}

// NewTable starts a table with these column names.
func NewTable(io *iostreams.IOStreams, header ...string) *Table {
	return &Table{io: io, header: header}
}

// Row adds a row of plain cells.
func (t *Table) Row(cells ...string) {
	r := make([]cell, len(cells))
	for i, c := range cells {
		r[i] = cell{text: Safe(c)}
	}
	t.rows = append(t.rows, r)
}

// ColoredRow adds a row whose cells may be coloured on a terminal (nil: plain).
func (t *Table) ColoredRow(cells []string, colors []func(string) string) {
	r := make([]cell, len(cells))
	for i, c := range cells {
		r[i] = cell{text: Safe(c)}
		if i < len(colors) {
			r[i].color = colors[i]
		}
	}
	t.rows = append(t.rows, r)
}

// Render writes the table to w.
func (t *Table) Render(w io.Writer) error {
	if !t.io.IsTTY() && !t.aligned {
		for _, r := range t.rows {
			texts := make([]string, len(r))
			for i, c := range r {
				texts[i] = strings.ReplaceAll(c.text, "\t", " ")
			}
			if _, err := fmt.Fprintln(w, strings.Join(texts, "\t")); err != nil {
				return err
			}
		}
		return nil
	}
	widths := make([]int, len(t.header))
	for i, h := range t.header {
		widths[i] = utf8.RuneCountInString(h)
	}
	for _, r := range t.rows {
		for i, c := range r {
			if i < len(widths) {
				widths[i] = max(widths[i], utf8.RuneCountInString(c.text))
			}
		}
	}
	if t.io.IsTTY() {
		fit(widths, t.header, t.io.Width())
	}
	var b strings.Builder
	for i, h := range t.header {
		b.WriteString(pad(t.io.Bold(h), utf8.RuneCountInString(h), widths[i], i == len(t.header)-1))
	}
	b.WriteString("\n")
	for _, r := range t.rows {
		for i, c := range r {
			if i >= len(widths) {
				break
			}
			text := truncate(c.text, widths[i])
			shown := text
			if c.color != nil {
				shown = c.color(text)
			}
			b.WriteString(pad(shown, utf8.RuneCountInString(text), widths[i], i == len(r)-1))
		}
		b.WriteString("\n")
	}
	_, err := io.WriteString(w, b.String())
	return err
}

const gap = 3

// names are the headers of columns that are never truncated: a cut name cannot be copied.
var names = map[string]bool{"NAME": true, "NAMESPACE": true, "STEP": true, "CURRENT": true, "OBJECT": true}

// fit shrinks the widest columns until the table fits width (never below 8, nor below its
// header, which is never truncated: a header wider than its column would run into the next).
// Name columns keep their width: when only they are left, the table runs past width.
func fit(widths []int, header []string, width int) {
	for {
		total := 0
		for _, w := range widths {
			total += w + gap
		}
		if total-gap <= width {
			return
		}
		widest := -1
		for i, w := range widths {
			if !names[header[i]] && w > floor(header[i]) && (widest < 0 || w > widths[widest]) {
				widest = i
			}
		}
		if widest < 0 {
			return
		}
		widths[widest] = max(floor(header[widest]), widths[widest]-(total-gap-width))
	}
}

// floor is the narrowest a column under header may get.
func floor(header string) int {
	return max(8, utf8.RuneCountInString(header))
}

func pad(shown string, visible, width int, last bool) string {
	if last {
		return shown
	}
	return shown + strings.Repeat(" ", width-visible+gap)
}

func truncate(s string, width int) string {
	if utf8.RuneCountInString(s) <= width {
		return s
	}
	r := []rune(s)
	return string(r[:width-1]) + "…"
}
