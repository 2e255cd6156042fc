package logstream

import "unicode/utf8"

// JSONBytes is the length of s as a JSON string written by encoding/json,
// or more: control characters (an ANSI colour's ESC, a progress bar's
// \r), HTML's <, > and &, U+2028, U+2029 and invalid UTF-8 become six
// bytes (\u00XX), quotes and backslashes two. A batch and a page are
// sized by it: output full of escapes is up to six times its own size on
// the wire.
func JSONBytes(s string) int {
	n := 2
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			switch {
			case c < 0x20 || c == '<' || c == '>' || c == '&':
				n += 6
			case c == '"' || c == '\\':
				n += 2
			default:
				n++
			}
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if (r == utf8.RuneError && size == 1) || r == '\u2028' || r == '\u2029' {
			n += 6
		} else {
			n += size
		}
		i += size
	}
	return n
}

// batchLineBytes is at least what a line adds to a published batch: its
// number, time and stream with their keys, and its text escaped.
func batchLineBytes(l Line) int { return 96 + JSONBytes(l.Text) }
