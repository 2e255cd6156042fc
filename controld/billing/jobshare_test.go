package billing_test

import (
	"testing"
	"time"

	"github.com/gpuaas/gpuaas/controld/billing"
)

// TestShare checks a job's part of its allocation's windows: whole
// windows, parts of windows pro rata, nothing outside, and one rounding
// down of the sum (three thirds of 100 are 100, not 99).
func TestShare(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	win := func(startSec, secs, amount int64) billing.Window {
		s := t0.Add(time.Duration(startSec) * time.Second)
		return billing.Window{Start: s, End: s.Add(time.Duration(secs) * time.Second), Seconds: secs, AmountMinor: amount}
	}
	at := func(sec int64) time.Time { return t0.Add(time.Duration(sec) * time.Second) }
	ws := []billing.Window{win(0, 60, 60), win(60, 60, 60), win(120, 30, 31)}
	for _, tt := range []struct {
		name            string
		from, to        time.Time
		wantSec, wantAm int64
	}{
		{"all of them", at(-10), at(1000), 150, 151},
		{"exactly the windows", at(0), at(150), 150, 151},
		{"inside one window", at(10), at(40), 30, 30},
		{"across two", at(30), at(90), 60, 60},
		{"part of the odd one", at(120), at(135), 15, 15}, // 31 × 15/30 = 15.5
		{"before", at(-100), at(0), 0, 0},
		{"after", at(150), at(300), 0, 0},
		{"reversed", at(100), at(50), 0, 0},
	} {
		sec, am := billing.Share(ws, tt.from, tt.to)
		if sec != tt.wantSec || am != tt.wantAm {
			t.Errorf("%s: %ds %d; want %ds %d", tt.name, sec, am, tt.wantSec, tt.wantAm)
		}
	}
	thirds := []billing.Window{win(0, 30, 100), win(30, 30, 100), win(60, 30, 100)}
	if _, am := billing.Share(thirds, at(10), at(80)); am != 233 { // 100×20/30 + 100 + 100×20/30 = 233.3
		t.Errorf("thirds: %d; want 233 (one rounding)", am)
	}
	if _, am := billing.Share([]billing.Window{win(0, 3, 1), win(3, 3, 1), win(6, 3, 1)}, at(1), at(8)); am != 2 { // 2/3+1+2/3
		t.Errorf("small thirds: %d; want 2", am)
	}
}
