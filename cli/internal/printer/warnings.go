package printer

import (
	"fmt"
	"io"

	"sigs.k8s.io/yaml"

	"github.com/kiln-ml/kiln/cli/internal/iostreams"
)

// Warnings prints what the server warned of, one "Warning: ..." a line on standard error, as
// kubectl prints Kubernetes' warnings: the job was created, but may not run as hoped.
func Warnings(s *iostreams.IOStreams, warnings []string) {
	for _, w := range warnings {
		fmt.Fprintf(s.ErrOut, "%s %s\n", s.Yellow("Warning:"), w)
	}
}

// DryRun prints what a dry run would have created: its manifest as YAML (the default) or
// JSON, or its name (as the server would name it) for -o name.
func DryRun(w io.Writer, f Format, manifest, name string) error {
	switch f {
	case FormatName:
		_, err := fmt.Fprintln(w, name)
		return err
	case FormatJSON:
		data, err := yaml.YAMLToJSON([]byte(manifest))
		if err != nil {
			return err
		}
		return writeIndentedJSON(w, data)
	}
	_, err := fmt.Fprint(w, manifest)
	return err
}
