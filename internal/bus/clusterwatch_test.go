package bus_test

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/gpuaas/gpuaas/internal/bus"
	"github.com/gpuaas/gpuaas/internal/testutil"
)

// TestWatchClusterMovesOffServerWithoutCluster: a connection whose server
// lost the rest of its cluster (here: the two others stopped, so it has no
// JetStream meta leader) is made again by WatchCluster, which moves it to
// another server of its pool. Without the watch, nothing moved it: the
// server still answers its pings.
func TestWatchClusterMovesOffServerWithoutCluster(t *testing.T) {
	t.Parallel()
	c, err := bus.StartCluster(bus.Config{StoreDir: t.TempDir()}, 3)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Shutdown()
	var reconnects atomic.Int64
	urls := []string{c.ServerURL(0), c.ServerURL(1), c.ServerURL(2)}
	nc, err := bus.Connect(strings.Join(urls, ","), "watch-test", nats.DontRandomize(),
		nats.ReconnectHandler(func(*nats.Conn) { reconnects.Add(1) }))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	if nc.ConnectedUrl() != urls[0] {
		t.Fatalf("connected to %s; want %s", nc.ConnectedUrl(), urls[0])
	}
	log, logs := testutil.CaptureLog(t)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- bus.WatchCluster(ctx, nc, log) }()
	defer func() { cancel(); <-done }()

	// A healthy cluster: the watch leaves the connection alone.
	time.Sleep(bus.ClusterProbeInterval * (bus.ClusterProbeFailures + 1)) // probes run meanwhile: nothing to wait for
	if n := reconnects.Load(); n != 0 {
		t.Fatalf("reconnects on a healthy cluster: got %d; want 0", n)
	}
	c.Stop(1)
	c.Stop(2)
	start := time.Now()
	testutil.EventuallyWithin(t, 60*time.Second, "the watch to move the connection", func() bool {
		return len(logs.Lines("nats server lost its cluster")) > 0
	})
	t.Logf("server without its cluster noticed after %v", time.Since(start).Round(time.Millisecond))
}
