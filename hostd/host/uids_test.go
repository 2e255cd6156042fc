package host_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gpuaas/gpuaas/hostd/host"
)

// TestUIDRangeNeverReuses: uids come in order, each once, across
// restarts (a new UIDRange on the same record), past a line torn by a
// crash, skipping ids an account holds; an exhausted range is an error,
// not a uid given twice.
func TestUIDRangeNeverReuses(t *testing.T) {
	rec := filepath.Join(t.TempDir(), "state", "uids")
	now := func() time.Time { return time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC) }
	r := &host.UIDRange{Path: rec, First: 700_100_000, Last: 700_100_003, Now: now}
	a, err := r.Next("ua")
	if err != nil {
		t.Fatal(err)
	}
	b, err := (&host.UIDRange{Path: rec, First: 700_100_000, Last: 700_100_003}).Next("ub")
	if err != nil {
		t.Fatal(err)
	}
	if a != 700_100_000 || b != 700_100_001 {
		t.Errorf("got %d, %d; want 700100000, 700100001", a, b)
	}
	// A crash in the middle of a record line: what was written reads as
	// a lower uid, and the next line starts on a line of its own.
	f, err := os.OpenFile(rec, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = f.WriteString("7001")
	_ = f.Close()
	c, err := r.Next("uc")
	if err != nil || c != 700_100_002 {
		t.Errorf("after a torn line: got %d, %v; want 700100002", c, err)
	}
	d, err := r.Next("ud")
	if err != nil || d != 700_100_003 {
		t.Errorf("got %d, %v; want 700100003", d, err)
	}
	if _, err := r.Next("ue"); !errors.Is(err, host.ErrUIDsExhausted) {
		t.Errorf("past the range: got %v; want ErrUIDsExhausted", err)
	}
	b2, _ := os.ReadFile(rec)
	lines := strings.Split(strings.TrimSpace(string(b2)), "\n")
	want := []string{"700100000 ua 2026-01-02T03:04:05Z", "700100001 ub ", "7001", "700100002 uc 2026-01-02T03:04:05Z", "700100003 ud 2026-01-02T03:04:05Z"}
	if len(lines) != len(want) {
		t.Fatalf("record = %q", b2)
	}
	for i, w := range want {
		if !strings.HasPrefix(lines[i], w) {
			t.Errorf("record line %d = %q; want %q...", i, lines[i], w)
		}
	}

	// Ids an account or group holds are skipped: 0 (root) and 1 (daemon
	// or bin) are on every machine.
	low := &host.UIDRange{Path: filepath.Join(t.TempDir(), "uids"), First: 1, Last: 70_000}
	if got, err := low.Next("x"); err != nil || got <= 1 {
		t.Errorf("got %d, %v; want an id no account holds", got, err)
	}
	if _, err := (&host.UIDRange{Path: rec}).Next("x"); !errors.Is(err, host.ErrInvalidUser) {
		t.Errorf("empty range: got %v; want ErrInvalidUser", err)
	}
}
