package printer

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"time"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"sigs.k8s.io/yaml"

	kilnv1 "github.com/kiln-ml/kiln/api/gen/kiln/v1"
	"github.com/kiln-ml/kiln/cli/internal/iostreams"
)

// writeJSON writes m as indented JSON with the API's field names (proto names, snake_case)
// and enum names; the same bytes every time, so output can be diffed and parsed.
func writeJSON(w io.Writer, m proto.Message) error {
	data, err := protojson.MarshalOptions{UseProtoNames: true}.Marshal(m)
	if err != nil {
		return err
	}
	// protojson varies its whitespace on purpose; normalise it.
	return writeIndentedJSON(w, data)
}

// writeIndentedJSON writes JSON data indented by two spaces, with a newline.
func writeIndentedJSON(w io.Writer, data []byte) error {
	var out bytes.Buffer
	if err := json.Indent(&out, compact(data), "", "  "); err != nil {
		return err
	}
	out.WriteByte('\n')
	_, err := w.Write(out.Bytes())
	return err
}

// writeYAML writes m as YAML with the same names as JSON.
func writeYAML(w io.Writer, m proto.Message) error {
	data, err := protojson.MarshalOptions{UseProtoNames: true}.Marshal(m)
	if err != nil {
		return err
	}
	y, err := yaml.JSONToYAML(compact(data))
	if err != nil {
		return err
	}
	_, err = w.Write(y)
	return err
}

func compact(data []byte) []byte {
	var b bytes.Buffer
	if err := json.Compact(&b, data); err != nil {
		return data
	}
	return b.Bytes()
}

// StateName is a state as people read it: Queued, Running, ...
func StateName(s kilnv1.State) string {
	if s == kilnv1.State_STATE_UNSPECIFIED {
		return "Unknown"
	}
	name := strings.TrimPrefix(s.String(), "STATE_")
	return name[:1] + strings.ToLower(name[1:])
}

// JobState is a job's state as the tables show it: Starting for a running job whose pods
// wait for something that does not come by itself (a reason WaitingFor...: a claim, an
// image, a Secret, a node), never plainly Running.
func JobState(st *kilnv1.TrainJobStatus) string {
	if st.GetState() == kilnv1.State_STATE_RUNNING && strings.HasPrefix(st.GetReason(), "WaitingFor") {
		return "Starting"
	}
	return StateName(st.GetState())
}

// ParseState reads a state name (any case, with or without STATE_).
func ParseState(s string) (kilnv1.State, error) {
	want := "STATE_" + strings.ToUpper(strings.TrimPrefix(strings.ToUpper(s), "STATE_"))
	if v, ok := kilnv1.State_value[want]; ok && v != 0 {
		return kilnv1.State(v), nil
	}
	return 0, fmt.Errorf("unknown state %q: want one of Queued, Suspended, Running, Complete, Failed", s)
}

// StateColor is how a state is coloured on a terminal.
func StateColor(io *iostreams.IOStreams, s kilnv1.State) func(string) string {
	switch s {
	case kilnv1.State_STATE_COMPLETE:
		return io.Green
	case kilnv1.State_STATE_FAILED:
		return io.Red
	case kilnv1.State_STATE_RUNNING:
		return io.Blue
	case kilnv1.State_STATE_QUEUED:
		return io.Yellow
	}
	return io.Gray
}

// Age is how long ago t was, kubectl-style: 42s, 5m, 3h, 2d.
func Age(now, t time.Time) string {
	if t.IsZero() {
		return "<unknown>"
	}
	return Duration(now.Sub(t))
}

// Duration is d in its largest whole unit (with minutes under 10 hours: 3h12m).
func Duration(d time.Duration) string {
	switch {
	case d < 0:
		d = 0
		fallthrough
	case d < time.Minute:
		return fmt.Sprintf("%ds", int(d.Seconds()))
	case d < time.Hour:
		return fmt.Sprintf("%dm", int(d.Minutes()))
	case d < 10*time.Hour:
		if m := int(d.Minutes()) % 60; m != 0 {
			return fmt.Sprintf("%dh%dm", int(d.Hours()), m)
		}
		return fmt.Sprintf("%dh", int(d.Hours()))
	case d < 48*time.Hour:
		return fmt.Sprintf("%dh", int(d.Hours()))
	}
	return fmt.Sprintf("%dd", int(d.Hours()/24))
}

// Until is when t comes, relative to now: "in 42m", or "42m ago" once past.
func Until(now, t time.Time) string {
	if d := t.Sub(now); d >= 0 {
		return "in " + Duration(d)
	}
	return Duration(now.Sub(t)) + " ago"
}
