// Package fuzzytime says times and durations the way a person reads them
// at a glance ("5m ago", "in 3h", "2d"): the CLI's tables and the
// dashboard use the same words.
package fuzzytime

import (
	"fmt"
	"time"
)

// Ago describes t relative to now: "just now", "5m ago", "in 3h".
func Ago(now, t time.Time) string {
	d := now.Sub(t)
	if d < 0 {
		return "in " + Duration(-d)
	}
	if d < time.Minute {
		return "just now"
	}
	return Duration(d) + " ago"
}

// Duration rounds d to its largest unit: "45s", "5m", "3h", "2d".
func Duration(d time.Duration) string {
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
