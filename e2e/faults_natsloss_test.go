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

// TestFaultNATSNodeLossUnderLoad is issue 13's fault test "stop one of
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
	if t.Failed() {
		return
	}

	// What the stream holds for the user since the watcher subscribed.
	var want []uint64
	for after, more := pos.Next, true; more; {
		page, err := watcher.EventsSince(t.Context(), api.EventsSinceRequest{After: after})
		if err != nil {
			t.Fatal(err)
		}
		for _, ev := range page.Events {
			want = append(want, ev.Seq)
		}
		after, more = page.Next, page.More
	}
	if len(want) < workers*cycles*2 {
		t.Fatalf("the stream holds %d events for the user; want at least %d (2 per cycle)", len(want), workers*cycles*2)
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
