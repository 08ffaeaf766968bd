package printer

import (
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/spf13/cobra"
	"google.golang.org/protobuf/proto"

	"github.com/kiln-ml/kiln/cli/internal/factory"
	"github.com/kiln-ml/kiln/sdk-gen/go/kiln"
)

// Format is what -o asked for: a table (""), or one of the formats below.
type Format string

// The formats of -o. A command takes those its Formats list.
const (
	FormatTable Format = ""
	// FormatWide is the table with more columns.
	FormatWide Format = "wide"
	// FormatJSON and FormatYAML are the API's message, with its field names.
	FormatJSON Format = "json"
	FormatYAML Format = "yaml"
	// FormatName is the name of what the command made, alone on a line.
	FormatName Format = "name"
	// FormatManifest is the Kubernetes object.
	FormatManifest Format = "manifest"
)

// Formats are what a command's -o takes besides its table: the one list from which the
// flag is added, its help written, and what it was given checked.
type Formats []Format

// String is the formats as help and errors say them: "wide, json or yaml".
func (fs Formats) String() string {
	names := make([]string, len(fs))
	for i, f := range fs {
		names[i] = string(f)
	}
	if len(names) < 2 {
		return strings.Join(names, "")
	}
	return strings.Join(names[:len(names)-1], ", ") + " or " + names[len(names)-1]
}

// AddFlag adds -o/--output to cmd, filling *p; usage is its help (empty: the formats).
func (fs Formats) AddFlag(cmd *cobra.Command, p *string, usage string) {
	if usage == "" {
		usage = fs.String()
	}
	cmd.Flags().StringVarP(p, "output", "o", "", usage)
}

// Parse checks what -o was given, before anything is asked of the server: one of the
// formats, or nothing for the table; anything else is a usage error naming them.
func (fs Formats) Parse(s string) (Format, error) {
	if s != "" && !slices.Contains(fs, Format(s)) {
		return "", factory.Usagef("--output %q: want %s", s, fs)
	}
	return Format(s), nil
}

// Client is how a command that prints objects starts: -o is checked first (a usage error
// before anything is asked of the server), then the factory's client is made.
func (fs Formats) Client(f *factory.Factory, output string) (Format, *kiln.Client, error) {
	format, err := fs.Parse(output)
	if err != nil {
		return "", nil, err
	}
	c, err := f.Client()
	return format, c, err
}

// Print writes m as JSON or YAML, or its name, as f says, and reports whether it did: the
// table, wide and manifest are each command's own to write.
func (f Format) Print(w io.Writer, m proto.Message) (bool, error) {
	switch f {
	case FormatJSON:
		return true, writeJSON(w, m)
	case FormatYAML:
		return true, writeYAML(w, m)
	case FormatName:
		if named, ok := m.(interface{ GetName() string }); ok {
			_, err := fmt.Fprintln(w, named.GetName())
			return true, err
		}
	}
	return false, nil
}
