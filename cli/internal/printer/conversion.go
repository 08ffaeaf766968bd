package printer

import (
	"fmt"
	"io"

	kilnv1 "github.com/kiln-ml/kiln/api/gen/kiln/v1"
)

// ConversionWarnings prints a conversion's warnings, and its notes unless quiet, one a line
// (`kiln convert`, `kiln submit --convert`).
func ConversionWarnings(w io.Writer, ws []*kilnv1.ConversionWarning, quiet bool) {
	for _, x := range ws {
		kind := "warning"
		if x.GetNote() {
			if quiet {
				continue
			}
			kind = "note"
		}
		fmt.Fprintf(w, "%s: %s %s: %s\n", kind, x.GetSource(), x.GetField(), x.GetMessage())
	}
}
