package identity

import (
	"testing"
	"time"
)

func TestLockedUntil(t *testing.T) {
	lim := Limit{MaxFailures: 3, Lockout: time.Minute, MaxLockout: 10 * time.Minute, Window: time.Hour}
	last := time.Date(2030, 1, 1, 12, 0, 0, 0, time.UTC)
	tests := []struct {
		name     string
		failures int
		want     time.Duration // after last; 0 means not locked
	}{
		{name: "no failures", failures: 0, want: 0},
		{name: "below the budget", failures: 2, want: 0},
		{name: "budget used", failures: 3, want: time.Minute},
		{name: "one more", failures: 4, want: 2 * time.Minute},
		{name: "two more", failures: 5, want: 4 * time.Minute},
		{name: "capped", failures: 8, want: 10 * time.Minute},
		{name: "far beyond, no overflow", failures: 1 << 20, want: 10 * time.Minute},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := lim.lockedUntil(tt.failures, last)
			if tt.want == 0 {
				if !got.IsZero() {
					t.Fatalf("got locked until %v; want not locked", got)
				}
				return
			}
			if d := got.Sub(last); d != tt.want {
				t.Fatalf("got a lockout of %v; want %v", d, tt.want)
			}
		})
	}
}

func TestLimitDefaults(t *testing.T) {
	var l LoginLimits
	if err := l.CheckAndSetDefaults(); err != nil {
		t.Fatal(err)
	}
	if l.Account != DefaultAccountLimit || l.Source != DefaultSourceLimit {
		t.Fatalf("got %+v; want the defaults", l)
	}
	bad := []Limit{
		{MaxFailures: -1},
		{Lockout: -time.Second},
		{Lockout: time.Hour, MaxLockout: time.Minute},
		{MaxLockout: 2 * time.Hour, Window: time.Hour},
	}
	for _, b := range bad {
		l := LoginLimits{Account: b}
		if err := l.CheckAndSetDefaults(); err == nil {
			t.Errorf("limit %+v: got no error; want one", b)
		}
	}
}
