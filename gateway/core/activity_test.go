package core

import (
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/gpuaas/gpuaas/internal/api"
)

// recordingNotifier keeps what it was told.
type recordingNotifier struct {
	mu  sync.Mutex
	got []string
}

func (n *recordingNotifier) Notify(msg string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.got = append(n.got, msg)
}

func (n *recordingNotifier) messages() []string {
	n.mu.Lock()
	defer n.mu.Unlock()
	return append([]string(nil), n.got...)
}

func testCore() *Core { return &Core{log: slog.New(slog.DiscardHandler)} }

// TestActivityCollect: an allocation is reported once per interval in
// which its flag was touched; an entry touched and then closed is still
// reported once; a report that failed is merged into the next, newer
// times winning.
func TestActivityCollect(t *testing.T) {
	c := testCore()
	t0 := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	a := c.Track("alloc-a", nil)
	b := c.Track("alloc-b", nil)
	a.Touch()
	if got := c.activity.collect(t0); len(got) != 1 || !got["alloc-a"].Equal(t0) {
		t.Fatalf("first report: got %v; want alloc-a at %s", got, t0)
	}
	if got := c.activity.collect(t0.Add(time.Minute)); len(got) != 0 {
		t.Fatalf("nothing moved: got %v; want an empty report", got)
	}
	Touch(b.Flag())
	b.Close()
	if got := c.activity.collect(t0.Add(2 * time.Minute)); len(got) != 1 || got["alloc-b"].IsZero() {
		t.Fatalf("touched then closed: got %v; want alloc-b reported", got)
	}
	c.activity.unsent(map[string]time.Time{"alloc-a": t0.Add(3 * time.Minute)})
	c.activity.unsent(map[string]time.Time{"alloc-a": t0.Add(time.Minute)})
	if got := c.activity.collect(t0.Add(4 * time.Minute)); !got["alloc-a"].Equal(t0.Add(3 * time.Minute)) {
		t.Fatalf("after a failed report: got %v; want alloc-a at the newer unsent time", got)
	}
	a.Close()
	c.activity.collect(t0.Add(5 * time.Minute))
	c.activity.mu.Lock()
	left := len(c.activity.byAlloc)
	c.activity.mu.Unlock()
	if left != 0 {
		t.Errorf("entries left after every registration closed: %d; want 0", left)
	}
}

// TestNoticesReachRegisteredNotifiersOnce: a notice goes to the
// allocation's notifiers only (not another allocation's, not one that
// closed), on one line, and a repeated event id is dropped.
func TestNoticesReachRegisteredNotifiersOnce(t *testing.T) {
	c := testCore()
	shell, other, gone := &recordingNotifier{}, &recordingNotifier{}, &recordingNotifier{}
	defer c.Track("alloc-a", shell).Close()
	defer c.Track("alloc-b", other).Close()
	c.Track("alloc-a", gone).Close()
	defer c.Track("alloc-a", nil).Close() // an sftp session: no notices

	n := api.AllocNotice{AllocationID: "alloc-a", Kind: "idle", Message: "idle for 50 minutes;\nreleased in 10"}
	for _, id := range []int64{7, 7} {
		if c.activity.firstTime(id) {
			c.deliverNotice(n)
		}
	}
	want := "\r\ngpuaas: idle for 50 minutes; released in 10\r\n"
	if got := shell.messages(); len(got) != 1 || got[0] != want {
		t.Errorf("the allocation's session: got %q; want [%q]", got, want)
	}
	if got := other.messages(); len(got) != 0 {
		t.Errorf("another allocation's session: got %q; want nothing", got)
	}
	if got := gone.messages(); len(got) != 0 {
		t.Errorf("a closed session: got %q; want nothing", got)
	}
}
