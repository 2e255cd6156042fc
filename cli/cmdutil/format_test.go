package cmdutil

import (
	"testing"
	"time"
)

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
