package common

import "testing"

func TestProfileFor(t *testing.T) {
	tests := []struct {
		env  map[string]string
		want string
	}{
		{map[string]string{"TERM": "xterm-256color"}, "ANSI256"},
		{map[string]string{"TERM": "xterm-256color", "COLORTERM": "truecolor"}, "TrueColor"},
		{map[string]string{"TERM": "xterm"}, "ANSI"},
		{map[string]string{"TERM": "dumb"}, "Ascii"},
		{map[string]string{}, "Ascii"},
		{map[string]string{"TERM": "xterm-256color", "NO_COLOR": "1"}, "Ascii"},
	}
	names := map[int]string{0: "TrueColor", 1: "ANSI256", 2: "ANSI", 3: "Ascii"}
	for _, tt := range tests {
		if got := names[int(ProfileFor(func(k string) string { return tt.env[k] }))]; got != tt.want {
			t.Errorf("%v: got %s; want %s", tt.env, got, tt.want)
		}
	}
}
