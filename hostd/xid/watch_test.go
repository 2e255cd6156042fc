package xid

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// TestWatcherFollowsTheLog: records already in the log and records
// appended later (one written in two parts) are found, in order; XIDs of
// programs' bugs and noise are not.
func TestWatcherFollowsTheLog(t *testing.T) {
	path := filepath.Join(t.TempDir(), "kmsg")
	if err := os.WriteFile(path, []byte("6,1,100,-;nvidia: loaded\n4,2,200,-;NVRM: Xid (PCI:0000:3b:00): 79, pid=1, name=x, GPU has fallen off the bus.\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	found := make(chan Fault, 10)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	w := &Watcher{Path: path, Boot: boot, Poll: 10 * time.Millisecond}
	go func() { done <- w.Run(ctx, func(f Fault) { found <- f }) }()
	next := func() Fault {
		t.Helper()
		select {
		case f := <-found:
			return f
		case <-time.After(20 * time.Second):
			t.Fatal("no fault found")
			return Fault{}
		}
	}
	if f := next(); f.GPU != "0000:3b:00.0" || f.XID != 79 {
		t.Fatalf("got %+v; want xid 79 on 0000:3b:00.0", f)
	}
	fh, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer fh.Close()
	for _, s := range []string{
		"4,3,300,-;NVRM: Xid (PCI:0000:18:00): 13, pid=2, name=y, Graphics Exception\n",
		"4,4,400,-;NVRM: Xid (PCI:0000:af:00): 48, pid=3, ",
	} {
		if _, err := fh.WriteString(s); err != nil {
			t.Fatal(err)
		}
	}
	time.Sleep(50 * time.Millisecond) // let the watcher read the half record (not a readiness wait)
	if _, err := fh.WriteString("name=z, An uncorrectable double bit error (DBE) has been detected\n"); err != nil {
		t.Fatal(err)
	}
	if f := next(); f.GPU != "0000:af:00.0" || f.XID != 48 || !f.At.Equal(boot.Add(400*time.Microsecond)) {
		t.Fatalf("got %+v; want xid 48 on 0000:af:00.0 at +400µs", f)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("run: %v", err)
	}
	select {
	case f := <-found:
		t.Fatalf("got an extra fault %+v", f)
	default:
	}
}
