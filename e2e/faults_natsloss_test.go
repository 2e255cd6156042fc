package e2e

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/testutil"
)

// TestFaultNATSNodeLossUnderLoad is the fault test "stop one of
// three NATS servers under load", with separate processes: three
// nats-server processes in a cluster (JetStream R3, controld's auth
// callout), two `gpuaas controld` replicas, hostd agents, clients creating
// and releasing allocations (each retried with its idempotency key, as the
// CLI does) and a watcher following the user's events. The server the
// watcher is connected to is stopped mid-run: every request succeeds and
// the watcher sees every event of the user the stream holds, each once.
// Figures: client-visible errors, events seen/expected, the watcher's
// reconnect.
func TestFaultNATSNodeLossUnderLoad(t *testing.T) {
	const workers, cycles = 4, 12
	c := startFaultClusterWith(t, 2, 3)
	admin := c.client()
	startInstantHosts(t, c, admin, 4, 64)
	who, err := admin.Whoami(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	watcher := c.client()
	pos, err := watcher.EventsSince(t.Context(), api.EventsSinceRequest{Tail: true})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	events, err := watcher.SubscribeEvents(ctx, who.User.ID)
	if err != nil {
		t.Fatal(err)
	}
	var (
		seenMu  sync.Mutex // protects seen
		seen    = map[uint64]int{}
		repeats atomic.Int64
	)
	go func() {
		for ev := range events {
			if ev.Seq == 0 {
				continue
			}
			seenMu.Lock()
			seen[ev.Seq]++
			if seen[ev.Seq] > 1 {
				repeats.Add(1)
			}
			seenMu.Unlock()
		}
	}()

	var (
		errs errorKinds
		done atomic.Int64
		wg   sync.WaitGroup
	)
	// retry runs f until it succeeds (the same key each time), counting
	// what the client saw.
	retry := func(what string, f func(ctx context.Context) error) {
		for try := 0; ; try++ {
			if try == 50 {
				t.Errorf("%s: still failing after %d tries", what, try)
				return
			}
			cctx, ccancel := context.WithTimeout(context.Background(), 20*time.Second)
			err := f(cctx)
			ccancel()
			if err == nil {
				return
			}
			errs.add(err)
			time.Sleep(200 * time.Millisecond)
		}
	}
	for w := range workers {
		cl := c.client()
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range cycles {
				key := fmt.Sprintf("natsloss-%d-%d", w, i)
				var a *api.Allocation
				retry("create "+key, func(ctx context.Context) (err error) {
					a, err = cl.AllocCreate(ctx, api.AllocCreateRequest{Project: "faults", SKU: "h200-slice", GPUs: 1}, api.WithIdempotencyKey(key))
					return err
				})
				if a == nil {
					return
				}
				retry("release "+key, func(ctx context.Context) error {
					_, err := cl.AllocRelease(ctx, api.AllocReleaseRequest{ID: a.ID}, api.WithIdempotencyKey(key+"-r"))
					return err
				})
				done.Add(1)
			}
		}()
	}
	c.waitFor("a third of the cycles", func() bool { return done.Load() >= workers*cycles/3 })
	// Stop the server the watcher is on: it must move, and miss nothing.
	victim := -1
	for i, n := range c.nats {
		if watcher.Conn().ConnectedUrl() == n.url {
			victim = i
		}
	}
	if victim < 0 {
		t.Fatalf("the watcher is on %q, none of %v", watcher.Conn().ConnectedUrl(), c.natsURL)
	}
	p := c.procs[victim]
	p.name += " (killed)" // stopped on purpose
	reconnects := watcher.Conn().Stats().Reconnects
	stoppedAt := time.Now()
	if err := syscall.Kill(-p.cmd.Process.Pid, syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	testutil.EventuallyWithin(t, time.Minute, "the watcher to reconnect", func() bool {
		return watcher.Conn().Stats().Reconnects != reconnects
	})
	moved := time.Since(stoppedAt)
	wg.Wait()
	finished := time.Now()
	if t.Failed() {
		return
	}

	// The relay publishes outbox rows after their transaction commits and
	// retries, with a backoff, the ones the stopped server failed: the
	// stream may still be catching up when the last request succeeds
	// (requests need no stream). When the EVENTS stream's leader goes with
	// the server, the relay's batch in flight waits up to 10s for acks
	// ("no ack from JetStream") and every later row waits behind it: the
	// stream was seen holding 61 of the user's 240 events as the last
	// request succeeded, and all 240 10s later. (Before the relay's fix,
	// TestRelayFailsEveryUnackedRowAfterAckTimeout, it could wait for
	// ever: 65 events, 175 rows pending 2m on.) Wait (bounded) until no
	// outbox row is pending and the stream holds every event; a row still
	// pending, or an event missing, after that is lost.
	var (
		want    []uint64
		pending []api.OutboxEvent
		polls   int
	)
	caughtUp := func() bool {
		ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
		defer cancel()
		p, err := admin.OutboxList(ctx, api.OutboxListRequest{State: api.OutboxPending, Limit: 1000})
		if err != nil {
			t.Logf("outbox list: %v", err)
			return false
		}
		held, err := userEvents(ctx, watcher, pos.Next)
		if err != nil {
			t.Logf("events since: %v", err)
			return false
		}
		pending, want = p.Events, held
		polls++
		ok := len(pending) == 0 && len(want) >= workers*cycles*2
		if polls == 1 || polls%20 == 0 || ok {
			t.Logf("poll %d, %v after the last request: the stream holds %d events for the user, %d outbox rows are pending%s", polls,
				time.Since(finished).Round(time.Millisecond), len(want), len(pending), describeRows(pending))
		}
		return ok
	}
	deadline := time.Now().Add(2 * time.Minute)
	for !caughtUp() && time.Now().Before(deadline) {
		time.Sleep(250 * time.Millisecond) // between polls of the outbox and the stream
	}
	if len(pending) != 0 || len(want) < workers*cycles*2 {
		t.Fatalf("after 2m the stream holds %d events for the user (want at least %d, 2 per cycle) and %d outbox rows are still pending%s",
			len(want), workers*cycles*2, len(pending), describeRows(pending))
	}
	dead, err := admin.OutboxList(t.Context(), api.OutboxListRequest{State: api.OutboxDead})
	if err != nil {
		t.Fatal(err)
	}
	if len(dead.Events) != 0 {
		t.Fatalf("%d outbox rows are dead%s; want none", len(dead.Events), describeRows(dead.Events))
	}
	if published, err := admin.OutboxList(t.Context(), api.OutboxListRequest{State: api.OutboxPublished, Limit: 1000}); err == nil {
		var retried []api.OutboxEvent
		for _, e := range published.Events {
			if e.Attempts > 1 {
				retried = append(retried, e)
			}
		}
		t.Logf("outbox: %d rows published, %d of them after failed attempts%s", len(published.Events), len(retried), describeRows(retried))
	}
	last := want[len(want)-1]
	c.waitFor("the watcher to see the last event", func() bool {
		seenMu.Lock()
		defer seenMu.Unlock()
		return seen[last] > 0
	})
	seenMu.Lock()
	defer seenMu.Unlock()
	var missing []uint64
	for _, seq := range want {
		if seen[seq] == 0 {
			missing = append(missing, seq)
		}
	}
	t.Logf("stopped %s (the watcher's server) after %d of %d cycles; the watcher was on %s %v later",
		strings.TrimSuffix(p.name, " (killed)"), workers*cycles/3, workers*cycles, watcher.Conn().ConnectedUrl(), moved.Round(time.Millisecond))
	t.Logf("requests: %d create+release cycles by %d clients, all succeeded; client-visible errors %s", workers*cycles, workers, errs.String())
	t.Logf("events: %d expected, %d seen, %d missing, %d repeats", len(want), len(want)-len(missing), len(missing), repeats.Load())
	if len(missing) != 0 || repeats.Load() != 0 {
		t.Errorf("the watcher missed events %v and saw %d repeats; want every event once", missing, repeats.Load())
	}
}

// userEvents reads every event of the client's user the stream holds
// after sequence after, page by page.
func userEvents(ctx context.Context, cl *api.Client, after uint64) ([]uint64, error) {
	var seqs []uint64
	for more := true; more; {
		page, err := cl.EventsSince(ctx, api.EventsSinceRequest{After: after})
		if err != nil {
			return nil, err
		}
		for _, ev := range page.Events {
			seqs = append(seqs, ev.Seq)
		}
		after, more = page.Next, page.More
	}
	return seqs, nil
}

// describeRows says, for a log line or a failure, how far the relay got
// with outbox rows: their attempts, the latest next attempt, the first
// row's last error.
func describeRows(rows []api.OutboxEvent) string {
	if len(rows) == 0 {
		return ""
	}
	var b strings.Builder
	maxAttempts, last := 0, rows[0].NextAttemptAt
	for _, r := range rows {
		maxAttempts = max(maxAttempts, r.Attempts)
		if r.NextAttemptAt.After(last) {
			last = r.NextAttemptAt
		}
	}
	fmt.Fprintf(&b, " (up to %d attempts each, the latest next attempt in %v; first: %s %s attempts %d, error %q)",
		maxAttempts, time.Until(last).Round(time.Millisecond), rows[0].Kind, rows[0].Subject, rows[0].Attempts, rows[0].LastError)
	return b.String()
}
