package bus_test

import (
	"bytes"
	"log/slog"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/gpuaas/gpuaas/internal/bus"
	"github.com/gpuaas/gpuaas/internal/testutil"
)

type lockedBuffer struct {
	mu  sync.Mutex // protects buf
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// TestLogOutagesLogsOnceEachWay is the bug where the daemons said nothing
// when NATS went away and came back: a restart of the server is one
// "disconnected" line (however many reconnect attempts it takes) and one
// "reconnected" line with the outage's duration, and the handlers set
// before LogOutages still run.
func TestLogOutagesLogsOnceEachWay(t *testing.T) {
	dir := t.TempDir()
	srv, err := bus.Start(bus.Config{StoreDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	u, err := url.Parse(srv.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	port, _ := strconv.Atoi(u.Port())
	var out lockedBuffer
	log := slog.New(slog.NewTextHandler(&out, nil))
	var theirs atomic.Int32
	nc, err := bus.Connect(srv.ClientURL(), "outage-test", nats.ReconnectHandler(func(*nats.Conn) { theirs.Add(1) }), bus.LogOutages(log))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()

	srv.Shutdown()
	testutil.Eventually(t, "the disconnect logged", func() bool { return strings.Contains(out.String(), "nats disconnected") })
	time.Sleep(time.Second) // an outage long enough for several reconnect attempts
	srv, err = bus.Start(bus.Config{StoreDir: dir, Port: port})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Shutdown()
	testutil.Eventually(t, "the reconnect logged", func() bool { return strings.Contains(out.String(), "nats reconnected") })
	got := out.String()
	if n := strings.Count(got, "nats disconnected"); n != 1 {
		t.Errorf("got %d disconnect lines for one outage; want 1:\n%s", n, got)
	}
	if !strings.Contains(got, "outage=") || !strings.Contains(got, "conn=outage-test") {
		t.Errorf("the reconnect line lacks the outage or the connection's name:\n%s", got)
	}
	testutil.Eventually(t, "the handler set before LogOutages", func() bool { return theirs.Load() == 1 })
}
