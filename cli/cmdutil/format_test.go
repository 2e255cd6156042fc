package cmdutil

import (
	"testing"
	"time"
)

func TestFuzzyAgo(t *testing.T) {
	now := time.Date(2030, 1, 10, 12, 0, 0, 0, time.UTC)
	tests := []struct {
		name string
		t    time.Time
		want string
	}{
		{"seconds", now.Add(-30 * time.Second), "just now"},
		{"minutes", now.Add(-5 * time.Minute), "5m ago"},
		{"hours", now.Add(-3 * time.Hour), "3h ago"},
		{"days", now.Add(-72 * time.Hour), "3d ago"},
		{"future", now.Add(11 * time.Hour), "in 11h"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := FuzzyAgo(now, tt.t); got != tt.want {
				t.Errorf("got %q; want %q", got, tt.want)
			}
		})
	}
}

func TestFormatTime(t *testing.T) {
	now := time.Date(2030, 1, 10, 12, 0, 0, 0, time.UTC)
	at := now.Add(-2 * time.Hour)
	ios, _, _, _ := Test()
	if got, want := FormatTime(ios, now, at), "2030-01-10T10:00:00Z"; got != want {
		t.Errorf("piped: got %q; want %q", got, want)
	}
	ios.SetStdoutTTY(true)
	if got, want := FormatTime(ios, now, at), "2h ago"; got != want {
		t.Errorf("tty: got %q; want %q", got, want)
	}
	if got := FormatTime(ios, now, time.Time{}); got != "" {
		t.Errorf("zero: got %q; want empty", got)
	}
}
