package api

import (
	"fmt"
	"strings"
	"unicode/utf8"
)

// Free text (reasons, names, notes) is shown to other people: in `gpuaas
// watch`, tables and the TUI. A control character in it would reach their
// terminals as a command (ESC starts the sequences that move the cursor,
// rewrite the screen or set the window title), and the Unicode
// bidirectional overrides reorder what is shown (Trojan Source, CVE-2021-42574).
// The API refuses such text (CheckText), and what is printed to a terminal
// is neutralised anyway (SanitizeText): data stored before, and text that
// does not come through the API, such as a node's version or an SSH
// command.

// unsafeRune reports whether r must not reach a terminal as it is: C0
// controls (tab and newline included), DEL, C1 controls, and the
// bidirectional embeddings, overrides and isolates.
func unsafeRune(r rune) bool {
	switch {
	case r < 0x20, r == 0x7f, r >= 0x80 && r <= 0x9f:
		return true
	case r >= 0x202a && r <= 0x202e, r >= 0x2066 && r <= 0x2069:
		return true
	}
	return false
}

// CheckText refuses free text for field that is not valid UTF-8 or holds
// a control character or a bidirectional override, with invalid_argument
// naming the field and the first such character.
func CheckText(field, s string) error {
	for i, r := range s {
		if r == utf8.RuneError {
			if _, size := utf8.DecodeRuneInString(s[i:]); size == 1 {
				return Errorf(CodeInvalidArgument, "%s is not valid UTF-8 (byte %d)", field, i)
			}
		}
		if unsafeRune(r) {
			return Errorf(CodeInvalidArgument, "%s must be one line of printable text: it holds the control character %s at byte %d",
				field, escapeRune(r), i)
		}
	}
	return nil
}

// SanitizeText returns s fit for a terminal: each control character or
// bidirectional override is replaced by a visible escape (`\x1b`,
// `\u202e`) and each byte that is not UTF-8 by U+FFFD. Text without them
// is returned as it is. JSON output needs none of this: encoding/json
// escapes them.
func SanitizeText(s string) string {
	if clean(s) {
		return s
	}
	var b strings.Builder
	b.Grow(len(s) + 8)
	for i, r := range s {
		switch {
		case r == utf8.RuneError:
			if _, size := utf8.DecodeRuneInString(s[i:]); size == 1 {
				b.WriteRune(utf8.RuneError)
				continue
			}
			b.WriteRune(r)
		case unsafeRune(r):
			b.WriteString(escapeRune(r))
		default:
			b.WriteRune(r)
		}
	}
	return b.String()
}

func clean(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c >= 0x7f {
			// Slow path for any control or non-ASCII byte.
			for _, r := range s {
				if r == utf8.RuneError || unsafeRune(r) {
					return false
				}
			}
			return true
		}
	}
	return true
}

// escapeRune writes r as Go would quote it: \x1b, \u0085, \u202e.
func escapeRune(r rune) string {
	if r < 0x80 {
		return fmt.Sprintf(`\x%02x`, r)
	}
	return fmt.Sprintf(`\u%04x`, r)
}
