package cmdutil

import (
	"fmt"
	"time"
)

// FormatTime renders t for a table: relative ("5m ago") on a terminal,
// RFC 3339 when piped. The zero time is empty.
func FormatTime(ios *IOStreams, now, t time.Time) string {
	if t.IsZero() {
		return ""
	}
	if ios.IsStdoutTTY() {
		return FuzzyAgo(now, t)
	}
	return t.UTC().Format(time.RFC3339)
}

// FuzzyAgo describes t relative to now: "just now", "5m ago", "in 3h".
func FuzzyAgo(now, t time.Time) string {
	d := now.Sub(t)
	if d < 0 {
		return "in " + FuzzyDuration(-d)
	}
	if d < time.Minute {
		return "just now"
	}
	return FuzzyDuration(d) + " ago"
}

// FuzzyDuration rounds d to its largest unit: "45s", "5m", "3h", "2d".
func FuzzyDuration(d time.Duration) string {
	switch {
	case d < time.Minute:
		return fmt.Sprintf("%ds", int(d/time.Second))
	case d < time.Hour:
		return fmt.Sprintf("%dm", int(d/time.Minute))
	case d < 48*time.Hour:
		return fmt.Sprintf("%dh", int(d/time.Hour))
	}
	return fmt.Sprintf("%dd", int(d/(24*time.Hour)))
}
