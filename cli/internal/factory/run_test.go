package factory

import (
	"context"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/spf13/cobra"
)

func TestRunNameE(t *testing.T) {
	type options struct{ Name string }
	for name, tc := range map[string]struct {
		withRunF bool
		want     string
	}{
		"a test's runF": {withRunF: true, want: "runF NAME"},
		"the real run":  {want: "run NAME"},
	} {
		t.Run(name, func(t *testing.T) {
			var got string
			record := func(which string) func(context.Context, *options) error {
				return func(_ context.Context, o *options) error {
					got = which + " " + o.Name
					return nil
				}
			}
			var runF func(context.Context, *options) error
			if tc.withRunF {
				runF = record("runF")
			}
			o := &options{}
			cmd := &cobra.Command{Use: "x NAME", Args: cobra.ExactArgs(1), RunE: RunNameE(o, &o.Name, runF, record("run"))}
			cmd.SetArgs([]string{"NAME"})
			if err := cmd.Execute(); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("ran (-want +got):\n%s", diff)
			}
		})
	}
}
