package api

import (
	"errors"
	"strings"
	"testing"
)

func TestCheckText(t *testing.T) {
	tests := []struct {
		name, text string
		want       string // "" when accepted; else in the message
	}{
		{name: "plain", text: "host rebooted for maintenance"},
		{name: "accents and symbols", text: "fini — merci, José ✓ 日本"},
		{name: "empty", text: ""},
		{name: "escape", text: "a\x1b[31mred", want: `\x1b at byte 1`},
		{name: "bell", text: "\x07", want: `\x07`},
		{name: "nul", text: "a\x00", want: `\x00`},
		{name: "tab", text: "a\tb", want: `\x09`},
		{name: "newline", text: "a\nb", want: `\x0a`},
		{name: "carriage return", text: "a\rb", want: `\x0d`},
		{name: "del", text: "a\x7f", want: `\x7f`},
		{name: "C1 CSI", text: "a\u009b2J", want: `\u009b`},
		{name: "C1 NEL", text: "a\u0085", want: `\u0085`},
		{name: "right-to-left override", text: "a\u202eb", want: `\u202e`},
		{name: "left-to-right embedding", text: "\u202a", want: `\u202a`},
		{name: "first strong isolate", text: "\u2068x", want: `\u2068`},
		{name: "pop directional isolate", text: "x\u2069", want: `\u2069`},
		{name: "invalid UTF-8", text: "a\xffb", want: "not valid UTF-8"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := CheckText("reason", tt.text)
			if tt.want == "" {
				if err != nil {
					t.Fatalf("got %v; want it accepted", err)
				}
				return
			}
			var e *Error
			if !errors.As(err, &e) || e.Code != CodeInvalidArgument || !strings.HasPrefix(e.Message, "reason ") || !strings.Contains(e.Message, tt.want) {
				t.Fatalf("got %v; want invalid_argument naming reason and %s", err, tt.want)
			}
		})
	}
}

func TestSanitizeText(t *testing.T) {
	tests := []struct{ name, in, want string }{
		{"plain unchanged", "h100 · José", "h100 · José"},
		{"OSC title", "x\x1b]0;pwned\x07y", `x\x1b]0;pwned\x07y`},
		{"CSI", "\x1b[2J", `\x1b[2J`},
		{"newline and tab", "a\nb\tc", `a\x0ab\x09c`},
		{"C1", "a\u009bb", `a\u009bb`},
		{"bidi", "a\u202eb\u2066", `a\u202eb\u2066`},
		{"invalid bytes", "a\xff\xfeb", "a\uFFFD\uFFFDb"},
		{"a real U+FFFD stays", "a\uFFFDb", "a\uFFFDb"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := SanitizeText(tt.in); got != tt.want {
				t.Fatalf("got %q; want %q", got, tt.want)
			}
		})
	}
}

// FuzzSanitizeText: whatever the input, the output holds nothing CheckText
// refuses, and clean text is left as it is.
func FuzzSanitizeText(f *testing.F) {
	for _, s := range []string{"", "plain", "\x1b[31m", "\u202e", "\xff", "a\u0085b", "\t\n\r"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		out := SanitizeText(s)
		if err := CheckText("text", out); err != nil {
			t.Fatalf("SanitizeText(%q) = %q: %v", s, out, err)
		}
		if CheckText("text", s) == nil && out != s {
			t.Fatalf("SanitizeText(%q) = %q; want clean text unchanged", s, out)
		}
	})
}
