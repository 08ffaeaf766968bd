package printer

import (
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Safe is s as a terminal may show it: control characters (escape sequences that set the
// window's title, clear the screen or move the cursor; carriage returns and newlines that
// forge lines) are written as \x1b, \r, \n. Text from outside (a trainer's metrics, a
// pod's message, labels) reaches the user's terminal only through it.
func Safe(s string) string {
	if utf8.ValidString(s) && strings.IndexFunc(s, unsafeRune) < 0 {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1: // not UTF-8: the byte, which a terminal may read as C1
			fmt.Fprintf(&b, `\x%02x`, s[i])
		case !unsafeRune(r):
			b.WriteRune(r)
		case r == '\n':
			b.WriteString(`\n`)
		case r == '\r':
			b.WriteString(`\r`)
		case r == '\t':
			b.WriteString(`\t`)
		case r < 0x100:
			fmt.Fprintf(&b, `\x%02x`, r)
		default:
			fmt.Fprintf(&b, `\u%04x`, r)
		}
		i += size
	}
	return b.String()
}

// unsafeRune: C0 and C1 controls, DEL, and the bidirectional overrides that reorder what
// follows them on screen.
func unsafeRune(r rune) bool {
	return unicode.IsControl(r) || (r >= 0x202a && r <= 0x202e) || (r >= 0x2066 && r <= 0x2069)
}
