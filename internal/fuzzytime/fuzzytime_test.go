package fuzzytime

import (
	"testing"
	"time"
)

func TestAgo(t *testing.T) {
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
			if got := Ago(now, tt.t); got != tt.want {
				t.Errorf("got %q; want %q", got, tt.want)
			}
		})
	}
}
