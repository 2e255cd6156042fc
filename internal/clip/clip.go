// Package clip shortens user input that messages quote, so that a 100 KB
// flag value or argument comes back as its first words and its size, not
// in full: on the terminal, in an error reply over NATS, in a log line.
package clip

import (
	"fmt"
	"strings"
	"unicode/utf8"
)

// MaxValue is the longest value String leaves whole, in bytes.
const MaxValue = 128

// keep is how many runes of a longer value String keeps.
const keep = 64

// MaxArg is the longest format argument Args leaves whole: arguments
// also carry lists and paths a message means to show in full, so only
// runaway input is cut.
const MaxArg = 1024

// MaxWord is the longest run of non-space bytes Words leaves whole: longer
// than any URL, path or identifier a message means to show.
const MaxWord = 512

// String returns s, or when it is longer than MaxValue bytes its first
// runes and its size: "aaaa…[102400 bytes]".
func String(s string) string {
	if len(s) <= MaxValue {
		return s
	}
	return cut(s, keep)
}

// cut keeps the first n runes of s and says how long s was.
func cut(s string, n int) string {
	end := 0
	for i := 0; i < n && end < len(s); i++ {
		_, size := utf8.DecodeRuneInString(s[end:])
		end += size
	}
	return fmt.Sprintf("%s…[%d bytes]", s[:end], len(s))
}

// Args returns args with every string longer than MaxArg cut to its
// first runes and its size, as String does: the arguments of a format
// whose strings may be user input.
func Args(args []any) []any {
	out := args
	for i, a := range args {
		s, ok := a.(string)
		if !ok || len(s) <= MaxArg {
			continue
		}
		if &out[0] == &args[0] {
			out = append([]any(nil), args...)
		}
		out[i] = cut(s, keep)
	}
	return out
}

// Words cuts every run of non-space bytes in msg longer than MaxWord: the
// last guard before a message reaches a person, for messages built
// elsewhere (flag parsing, wrapped errors) that quote input whole.
func Words(msg string) string {
	if len(msg) <= MaxWord {
		return msg
	}
	var b strings.Builder
	start := -1 // start of the current word
	flush := func(end int) {
		if start < 0 {
			return
		}
		if w := msg[start:end]; len(w) > MaxWord {
			b.WriteString(cut(w, keep))
		} else {
			b.WriteString(w)
		}
		start = -1
	}
	for i, r := range msg {
		if r == ' ' || r == '\n' || r == '\t' || r == '\r' {
			flush(i)
			b.WriteRune(r)
		} else if start < 0 {
			start = i
		}
	}
	flush(len(msg))
	return b.String()
}
