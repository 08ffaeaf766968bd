package printer

import (
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/kiln-ml/kiln/cli/internal/iostreams"
)

func TestDescription(t *testing.T) {
	io, _, _, _ := iostreams.Test()
	for name, tc := range map[string]struct {
		rows [][]string
		err  error
		want string
	}{
		"rows": {
			rows: [][]string{{"a", "1"}, {"bb", "2"}},
			want: "Name:   x\nLabels: a=1, b=2\n\nItems:\n  NAME   N\n  a      1\n  bb     2\n",
		},
		"none": {want: "Name:   x\nLabels: a=1, b=2\n\nItems:\n  none yet\n"},
		"error": {
			rows: [][]string{{"a", "1"}},
			err:  errors.New("forbidden"),
			want: "Name:   x\nLabels: a=1, b=2\n\nItems:\n  (not shown: forbidden)\n",
		},
	} {
		t.Run(name, func(t *testing.T) {
			d := NewDescription(8)
			d.Field("Name", "x")
			d.Field("Empty", "")
			d.Labels(map[string]string{"b": "2", "a": "1"})
			d.Labels(nil)
			tab := NewTable(io, "NAME", "N").Aligned()
			for _, r := range tc.rows {
				tab.Row(r...)
			}
			d.Section("Items", tab, tc.err, "none yet")
			if diff := cmp.Diff(tc.want, d.String()); diff != "" {
				t.Errorf("description (-want +got):\n%s", diff)
			}
		})
	}
}

func TestDescriptionSubFields(t *testing.T) {
	d := NewDescription(12)
	d.Field("Name", "x")
	d.Heading("Progress")
	d.SubField("Percent", "45%")
	d.SubField("Empty")
	d.SubField("Empty", "")
	d.SubField("Curve", "loss", "▇▅▃▁")
	want := "Name:       x\n\nProgress:\n  Percent:  45%\n  Curve:    loss\n            ▇▅▃▁\n"
	if diff := cmp.Diff(want, d.String()); diff != "" {
		t.Errorf("description (-want +got):\n%s", diff)
	}
}
