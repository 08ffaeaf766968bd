package printer

import (
	"bytes"
	"testing"

	"github.com/spf13/cobra"

	kilnv1 "github.com/kiln-ml/kiln/api/gen/kiln/v1"
	"github.com/kiln-ml/kiln/cli/internal/factory"
)

func TestFormats(t *testing.T) {
	for name, tc := range map[string]struct {
		formats   Formats
		given     string
		wantUsage string
		want      Format
		wantErr   string
	}{
		"one":                     {formats: Formats{FormatJSON}, given: "json", wantUsage: "json", want: FormatJSON},
		"two":                     {formats: Formats{FormatJSON, FormatYAML}, given: "yaml", wantUsage: "json or yaml", want: FormatYAML},
		"the table":               {formats: Formats{FormatWide, FormatJSON, FormatYAML}, wantUsage: "wide, json or yaml", want: FormatTable},
		"not one of them":         {formats: Formats{FormatWide, FormatJSON, FormatYAML, FormatManifest}, given: "xml", wantUsage: "wide, json, yaml or manifest", wantErr: `--output "xml": want wide, json, yaml or manifest`},
		"one another command has": {formats: Formats{FormatName}, given: "json", wantUsage: "name", wantErr: `--output "json": want name`},
	} {
		t.Run(name, func(t *testing.T) {
			var got string
			cmd := &cobra.Command{}
			tc.formats.AddFlag(cmd, &got, "")
			if usage := cmd.Flags().Lookup("output").Usage; usage != tc.wantUsage || cmd.Flags().ShorthandLookup("o") == nil {
				t.Errorf("flag -o/--output: usage %q, want %q", usage, tc.wantUsage)
			}
			f, err := tc.formats.Parse(tc.given)
			if tc.wantErr != "" {
				if err == nil || err.Error() != tc.wantErr || factory.ExitCode(err) != factory.ExitUsage {
					t.Errorf("Parse(%q) error %v, want the usage error %q", tc.given, err, tc.wantErr)
				}
				return
			}
			if err != nil || f != tc.want {
				t.Errorf("Parse(%q) = %q, %v; want %q", tc.given, f, err, tc.want)
			}
		})
	}
}

func TestPrint(t *testing.T) {
	j := &kilnv1.TrainJob{Name: "mnist", Namespace: "team"}
	for f, want := range map[Format]string{
		FormatJSON: "{\n  \"name\": \"mnist\",\n  \"namespace\": \"team\"\n}\n",
		FormatYAML: "name: mnist\nnamespace: team\n",
		FormatName: "mnist\n",
	} {
		var b bytes.Buffer
		if ok, err := f.Print(&b, j); !ok || err != nil || b.String() != want {
			t.Errorf("%q: Print() = %v, %v, %q; want %q", f, ok, err, b.String(), want)
		}
	}
	for _, f := range []Format{FormatTable, FormatWide, FormatManifest} {
		var b bytes.Buffer
		if ok, err := f.Print(&b, j); ok || err != nil || b.Len() > 0 {
			t.Errorf("%q: Print() = %v, %v, %q; want nothing printed, for the command to", f, ok, err, b.String())
		}
	}
}
