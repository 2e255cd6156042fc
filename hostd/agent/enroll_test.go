package agent

import (
	"context"
	"encoding/json"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/hostproto"
	"github.com/gpuaas/gpuaas/internal/testutil"
)

// signalHandler passes records to next and closes waiting at the first
// whose message contains want.
type signalHandler struct {
	slog.Handler
	want    string
	waiting chan struct{}
	seen    *atomic.Bool
}

func (h signalHandler) Handle(ctx context.Context, r slog.Record) error {
	if strings.Contains(r.Message, h.want) && h.seen.CompareAndSwap(false, true) {
		close(h.waiting)
	}
	return h.Handler.Handle(ctx, r)
}

// TestEnrollWaitsForControldToServe: a node enrolling while no controld
// serves enrollment (controld starting, or not serving while it cannot
// reach Postgres) waits and enrolls once one answers; the token is sent
// again only because nobody received it. Before, hostd exited with
// "enroll: controld is not answering" (seen on a loaded CI machine while
// controld's serving gate was closed). What answers is a subscriber in
// controld's queue group appearing on a real bus, as a replica does when
// it starts serving; the enrollment itself is tested against controld in
// TestEnrollmentTokenIsSingleUse.
func TestEnrollWaitsForControldToServe(t *testing.T) {
	t.Parallel()
	b := testutil.NATS(t)
	waiting := make(chan struct{})
	a := &Agent{cfg: Config{Now: time.Now, Log: slog.New(signalHandler{Handler: testutil.Logger(t).Handler(),
		want: "waiting for controld", waiting: waiting, seen: new(atomic.Bool)})}}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	type result struct {
		resp *hostproto.EnrollResponse
		err  error
	}
	done := make(chan result, 1)
	go func() {
		resp, err := a.enrollWhenAnswered(ctx, api.NewClient(b.Connect(t)), hostproto.EnrollRequest{Token: "gpe_waiting"})
		done <- result{resp, err}
	}()
	select {
	case <-waiting:
	case r := <-done:
		t.Fatalf("enrollment ended while no controld served it: %+v, %v; want it to wait", r.resp, r.err)
	}

	var received atomic.Int32
	nc := b.Connect(t)
	if _, err := nc.QueueSubscribe(hostproto.SubjectEnroll, "controld", func(m *nats.Msg) {
		received.Add(1)
		var req hostproto.EnrollRequest
		if err := json.Unmarshal(m.Data, &req); err != nil || req.Token != "gpe_waiting" {
			t.Errorf("enrollment request %s (%v); want the node's token", m.Data, err)
		}
		resp, _ := json.Marshal(hostproto.EnrollResponse{NodeID: "n-waited", Name: "node-waited"})
		_ = m.Respond(resp)
	}); err != nil {
		t.Fatal(err)
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	r := <-done
	if r.err != nil || r.resp.NodeID != "n-waited" {
		t.Fatalf("got %+v, %v; want enrolled as n-waited once controld answered", r.resp, r.err)
	}
	if n := received.Load(); n != 1 {
		t.Errorf("controld received the enrollment %d times; want once", n)
	}

}
