package agent

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestSequencerNeverRepeats: numbers grow within a run, across restarts
// (a restart starts above everything the last run could have used, even
// with its clock set back), and across a block boundary.
func TestSequencerNeverRepeats(t *testing.T) {
	dir := t.TempDir()
	now := time.Unix(1_800_000_000, 0)
	s, err := openSequencer(dir, now)
	if err != nil {
		t.Fatal(err)
	}
	var last uint64
	take := func(s *sequencer) uint64 {
		t.Helper()
		n, err := s.take()
		if err != nil {
			t.Fatal(err)
		}
		if n <= last {
			t.Fatalf("got %d after %d; want more", n, last)
		}
		last = n
		return n
	}
	first := take(s)
	if first != uint64(now.UnixNano()) {
		t.Errorf("first number %d; want the clock, %d", first, now.UnixNano())
	}
	for range seqBlock + 10 { // crosses a block: a second reservation
		take(s)
	}
	ceiling := readCeiling(t, dir)
	if ceiling <= last {
		t.Fatalf("ceiling on disk %d is not above the last number used, %d", ceiling, last)
	}
	// A restart with the clock an hour back starts at the ceiling.
	s2, err := openSequencer(dir, now.Add(-time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	if n := take(s2); n != ceiling {
		t.Errorf("after a restart got %d; want the ceiling %d", n, ceiling)
	}
	// A restart with the clock ahead starts at the clock.
	later := now.Add(time.Hour)
	s3, err := openSequencer(dir, later)
	if err != nil {
		t.Fatal(err)
	}
	if n := take(s3); n != uint64(later.UnixNano()) {
		t.Errorf("after a restart with the clock ahead got %d; want %d", n, later.UnixNano())
	}
}

func TestSequencerCorruptFile(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, seqFile), []byte("twelve\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := openSequencer(dir, time.Now()); err == nil || !strings.Contains(err.Error(), "corrupt") {
		t.Fatalf("got %v; want a corrupt-file error", err)
	}
}

func readCeiling(t *testing.T, dir string) uint64 {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, seqFile))
	if err != nil {
		t.Fatal(err)
	}
	n, err := strconv.ParseUint(strings.TrimSpace(string(b)), 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	return n
}
