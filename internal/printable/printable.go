// Package printable makes text from elsewhere (event payloads, names)
// safe to print on a terminal.
package printable

import (
	"strconv"
	"strings"
	"unicode"
)

// String escapes what a terminal would act on in text that came from
// elsewhere (a notice's message, a session's command, a name): control
// characters, escape sequences and invalid UTF-8 are written as Go
// escapes (\x1b, \n, \ufffd), so a line stays one line and cannot move
// the cursor or change colours.
func String(s string) string {
	if strings.IndexFunc(s, func(r rune) bool { return !unicode.IsPrint(r) && r != ' ' || r == unicode.ReplacementChar }) < 0 {
		return s
	}
	var b strings.Builder
	for _, r := range s {
		if unicode.IsPrint(r) && r != unicode.ReplacementChar || r == ' ' {
			b.WriteRune(r)
			continue
		}
		if r == unicode.ReplacementChar {
			b.WriteString(`\ufffd`)
			continue
		}
		q := strconv.QuoteRune(r)
		b.WriteString(q[1 : len(q)-1])
	}
	return b.String()
}
