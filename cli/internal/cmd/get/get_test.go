package get

import (
	"testing"

	"connectrpc.com/connect"

	kilnv1 "github.com/kiln-ml/kiln/api/gen/kiln/v1"
	"github.com/kiln-ml/kiln/cli/internal/kilntest"
)

func TestGet(t *testing.T) {
	s := kilntest.Start(t)
	s.Put(kilntest.Reporting(kilntest.Job("team", "mnist", kilnv1.State_STATE_RUNNING), 42, 7380, "0.5321098741"))
	for _, tc := range []struct {
		output string
		tty    bool
	}{{"", true}, {"", false}, {"wide", true}, {"json", false}, {"yaml", false}, {"manifest", false}} {
		name := "get-" + map[bool]string{true: "tty", false: "pipe"}[tc.tty]
		if tc.output != "" {
			name = "get-" + tc.output
		}
		t.Run(name, func(t *testing.T) {
			f, io := s.Factory(tc.tty)
			if err := run(t.Context(), &Options{Factory: f, Name: "mnist", Output: tc.output}); err != nil {
				t.Fatal(err)
			}
			kilntest.Golden(t, name, io.Out.(interface{ String() string }).String())
		})
	}
	f, _ := s.Factory(false)
	err := run(t.Context(), &Options{Factory: f, Name: "nope"})
	if connect.CodeOf(err) != connect.CodeNotFound {
		t.Errorf("a missing job = %v, want NotFound", err)
	}
	if err := run(t.Context(), &Options{Factory: f, Name: "mnist", Output: "xml"}); err == nil {
		t.Errorf("-o xml accepted")
	}
}
