package setcontext

import (
	"context"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/kiln-ml/kiln/api/clientconfig"
	"github.com/kiln-ml/kiln/cli/internal/factory"
	"github.com/kiln-ml/kiln/cli/internal/iostreams"
	"github.com/kiln-ml/kiln/cli/internal/kilntest"
)

func TestNewCmdSetContext(t *testing.T) {
	for name, tc := range map[string]struct {
		args        []string
		want        Options
		wantChanged map[string]bool
	}{
		"a new context": {args: []string{"prod", "--server", "https://kiln.example.com", "--token-file", "-", "--use"},
			want:        Options{Name: "prod", Context: clientconfig.Context{Server: "https://kiln.example.com"}, TokenFile: "-", Use: true},
			wantChanged: map[string]bool{"server": true, "token-file": true}},
		"the current one's namespace": {args: []string{"--current", "--namespace", "team-cv"},
			want:        Options{Current: true, Context: clientconfig.Context{Namespace: "team-cv"}},
			wantChanged: map[string]bool{"namespace": true}},
	} {
		t.Run(name, func(t *testing.T) {
			io, _, _, _ := iostreams.Test()
			var got *Options
			cmd := NewCmdSetContext(&factory.Factory{IO: io}, func(_ context.Context, o *Options) error { got = o; return nil })
			if _, _, err := kilntest.Execute(cmd, io, tc.args...); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, *got, cmpopts.IgnoreFields(Options{}, "Factory"), cmpopts.IgnoreUnexported(Options{})); diff != "" {
				t.Errorf("options (-want +got):\n%s", diff)
			}
			for flag, changed := range got.changed {
				if changed != tc.wantChanged[flag] {
					t.Errorf("flag --%s given: %v, want %v", flag, changed, tc.wantChanged[flag])
				}
			}
		})
	}
}
