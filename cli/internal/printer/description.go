package printer

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/kiln-ml/kiln/cli/internal/factory"
)

// Description is the text of a describe command: "Name:  value" lines with the values in
// one column, and titled sections of tables two spaces in.
type Description struct {
	strings.Builder
	// width is the name column's, colon included.
	width int
}

// NewDescription starts a description whose values start after a name column this wide.
func NewDescription(width int) *Description {
	return &Description{width: width}
}

// Field writes "name: value"; an empty value writes nothing.
func (d *Description) Field(name, value string) {
	if value != "" {
		fmt.Fprintf(d, "%-*s%s\n", d.width, name+":", Safe(value))
	}
}

// ColoredField writes "name: value rest" with value coloured by color (Kiln's own escape
// codes, on a terminal); value and rest are made Safe first.
func (d *Description) ColoredField(name, value string, color func(string) string, rest string) {
	if value != "" {
		fmt.Fprintf(d, "%-*s%s%s\n", d.width, name+":", color(Safe(value)), Safe(rest))
	}
}

// Heading writes a blank line and the title of a section of SubFields.
func (d *Description) Heading(title string) {
	fmt.Fprintf(d, "\n%s:\n", title)
}

// SubField writes "name: value" two spaces in, under a Heading, the value in the same
// column as Field's; further lines line up under the first. No value writes nothing.
func (d *Description) SubField(name string, lines ...string) {
	if len(lines) == 0 || lines[0] == "" {
		return
	}
	fmt.Fprintf(d, "  %-*s%s\n", d.width-2, Safe(name)+":", Safe(lines[0]))
	for _, l := range lines[1:] {
		fmt.Fprintf(d, "%*s%s\n", d.width, "", Safe(l))
	}
}

// Labels writes the labels as one field, "k=v, k=v" sorted by key (nothing when there are none).
func (d *Description) Labels(labels map[string]string) {
	var ls []string
	for _, k := range slices.Sorted(maps.Keys(labels)) {
		ls = append(ls, k+"="+labels[k])
	}
	d.Field("Labels", strings.Join(ls, ", "))
}

// Section writes a blank line, the title, then two spaces in: why the rows are missing (err),
// none when there are no rows, or the table.
func (d *Description) Section(title string, t *Table, err error, none string) {
	fmt.Fprintf(d, "\n%s:\n", title)
	switch {
	case err != nil:
		fmt.Fprintf(d, "  (not shown: %s)\n", factory.Message(err, ""))
	case len(t.rows) == 0:
		fmt.Fprintf(d, "  %s\n", none)
	default:
		var b strings.Builder
		_ = t.Render(&b)
		for _, line := range strings.SplitAfter(b.String(), "\n") {
			if line != "" {
				d.WriteString("  " + line)
			}
		}
	}
}
