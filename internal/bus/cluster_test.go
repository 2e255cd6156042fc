package bus

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// TestClusterKeepsR3StreamWithOneServerDown: three routed servers keep a
// stream of 3 replicas writable and whole while one of them is down, and
// the stopped one comes back on its ports.
func TestClusterKeepsR3StreamWithOneServerDown(t *testing.T) {
	c, err := StartCluster(Config{StoreDir: t.TempDir()}, 3)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Shutdown()
	nc, err := Connect(c.ClientURL(), "cluster-test")
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "T", Subjects: []string{"t.>"}, Replicas: 3}); err != nil {
		t.Fatalf("create R3 stream: %v", err)
	}
	sent := 0
	publish := func(n int) {
		for range n {
			sent++
			// A retry after a lost ack must not store it twice.
			id := jetstream.WithMsgID(fmt.Sprint(sent))
			for {
				pctx, pcancel := context.WithTimeout(ctx, 2*time.Second)
				_, err := js.Publish(pctx, "t.x", []byte("x"), id)
				pcancel()
				if err == nil {
					break
				}
				t.Logf("publish: %v", err)
				if ctx.Err() != nil {
					t.Fatalf("publish: %v", err)
				}
			}
		}
	}
	publish(10)
	stopped := 0
	for i := range c.Len() {
		if c.ServerURL(i) == nc.ConnectedUrl() {
			stopped = i // the one the client is on: it must move
		}
	}
	t.Logf("stopping %s (%s)", c.Name(stopped), c.ServerURL(stopped))
	c.Stop(stopped)
	publish(10)
	s, err := js.Stream(ctx, "T")
	if err != nil {
		t.Fatal(err)
	}
	info, err := s.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if info.State.Msgs != 20 || info.Config.Replicas != 3 {
		t.Fatalf("got %d messages, %d replicas; want 20, 3", info.State.Msgs, info.Config.Replicas)
	}
	if err := c.Restart(stopped); err != nil {
		t.Fatal(err)
	}
	if err := c.WaitJetStream(60 * time.Second); err != nil {
		t.Fatal(err)
	}
}
