package agent_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gpuaas/gpuaas/controld"
	"github.com/gpuaas/gpuaas/controld/controldtest"
	"github.com/gpuaas/gpuaas/controld/outbox"
	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/testutil"
)

// syncBuffer is a log sink several goroutines write to.
type syncBuffer struct {
	// mu protects b.
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestSIGTERMOfSingletonHolderUnderLoad is the fault test of graceful
// drain: two controld replicas, two hostd agents, 8 workers creating,
// reading and releasing allocations (idempotency keys) so node results
// flow all along. The replica holding the singletons (the outbox relay's
// lock) is stopped as SIGTERM stops it, mid-load. Every request gets a
// reply (none errs or times out), the stopped replica logs no `context
// canceled` (results being settled, requests being handled), the other
// replica takes the relay's lock (the failover figure), and every
// allocation ends released.
func TestSIGTERMOfSingletonHolderUnderLoad(t *testing.T) {
	t.Parallel()
	logs := &syncBuffer{}
	env := controldtest.Start(t, controldtest.Options{NoNodes: true,
		Log:   slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
		Hosts: controld.HostsConfig{HeartbeatInterval: 200 * time.Millisecond, AutoApproveSlots: true}})
	defer func() {
		if t.Failed() {
			t.Logf("the stopped replica's log:\n%s", logs.String())
		}
	}()
	ctx := context.Background()
	holder := 0
	testutil.Eventually(t, "the first replica to hold the relay lock", func() bool {
		var err error
		holder, err = outbox.RelayHolder(ctx, env.Server.Pool())
		return err == nil && holder != 0
	})
	second := env.StartReplica(t, nil)
	// The client's own connection, as a user's: not a replica's.
	admin := api.NewClient(env.UserConn(t, env.Admin.ID, env.AdminToken), api.WithToken(env.AdminToken),
		api.WithProject(env.Project.Name), api.WithTimeout(30*time.Second))
	for i := range 2 {
		a := startAgent(t, env, t.TempDir(), enroll(t, admin, fmt.Sprintf("node-f%d", i)), newFakeHost().registry())
		readyNode(t, admin, a.NodeID())
	}

	var served, failed atomic.Int64
	var mu sync.Mutex
	var errs []error
	var created []string
	call := func(what string, err error) bool {
		served.Add(1)
		if err != nil {
			failed.Add(1)
			mu.Lock()
			errs = append(errs, fmt.Errorf("%s: %w", what, err))
			mu.Unlock()
		}
		return err == nil
	}
	waitState := func(id, state string) bool {
		deadline := time.Now().Add(30 * time.Second)
		for time.Now().Before(deadline) {
			got, err := admin.AllocGet(ctx, id)
			if call("get "+id, err) && got.State == state {
				return true
			}
			time.Sleep(5 * time.Millisecond)
		}
		call("wait", fmt.Errorf("%s never became %s", id, state))
		return false
	}
	var stop atomic.Bool
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Go(func() {
			for i := 0; !stop.Load(); i++ {
				al, err := admin.AllocCreate(ctx, api.AllocCreateRequest{SKU: "h200-slice", GPUs: 1},
					api.WithIdempotencyKey(fmt.Sprintf("drain-create-%d-%d", w, i)))
				if !call(fmt.Sprintf("create %d/%d", w, i), err) {
					continue
				}
				mu.Lock()
				created = append(created, al.ID)
				mu.Unlock()
				if !waitState(al.ID, api.AllocActive) {
					continue
				}
				_, err = admin.AllocRelease(ctx, api.AllocReleaseRequest{ID: al.ID},
					api.WithIdempotencyKey(fmt.Sprintf("drain-release-%d-%d", w, i)))
				if call("release "+al.ID, err) {
					waitState(al.ID, api.AllocReleased)
				}
			}
		})
	}
	const each = 300
	testutil.EventuallyWithin(t, 2*time.Minute, "load before the stop", func() bool { return served.Load() >= each })

	// SIGTERM the singleton holder.
	atStop := served.Load()
	start := time.Now()
	stopped := make(chan error, 1)
	var drained time.Duration
	go func() {
		err := env.Stop()
		drained = time.Since(start)
		stopped <- err
	}()
	var failover time.Duration
	testutil.EventuallyWithin(t, time.Minute, "the other replica to take the relay lock", func() bool {
		h, err := outbox.RelayHolder(ctx, second.Server.Pool())
		if err == nil && h != 0 && h != holder {
			failover = time.Since(start)
			return true
		}
		return false
	})
	if err := <-stopped; err != nil {
		t.Errorf("stopped replica's run: %v", err)
	}
	testutil.EventuallyWithin(t, 2*time.Minute, "load after the stop", func() bool { return served.Load() >= atStop+each })
	stop.Store(true)
	wg.Wait()

	for i, err := range errs {
		if i == 10 {
			t.Errorf("... and %d more", len(errs)-10)
			break
		}
		if errors.Is(err, api.ErrTimedOut) {
			t.Errorf("a request got no reply: %v", err)
		} else {
			t.Errorf("a request failed: %v", err)
		}
	}
	log := logs.String()
	for _, line := range strings.Split(log, "\n") {
		if strings.Contains(line, "context canceled") {
			t.Errorf("the stopped replica logged: %s", line)
		}
	}
	if !strings.Contains(log, "controld drained") {
		t.Error(`the stopped replica did not log "controld drained"`)
	}
	inFlight := "?"
	if m := regexp.MustCompile(`msg="controld draining".* requests_in_flight=(\d+)`).FindStringSubmatch(log); m != nil {
		inFlight = m[1]
	}
	mu.Lock()
	ids := append([]string(nil), created...)
	mu.Unlock()
	for _, id := range ids {
		waitState(id, api.AllocReleased)
	}
	t.Logf("SIGTERM of the singleton holder under load: relay lock failover %d ms, drain %d ms, "+
		"requests served %d (%d after SIGTERM), in flight at SIGTERM %s, errors %d, allocations %d",
		failover.Milliseconds(), drained.Milliseconds(), served.Load(), served.Load()-atStop, inFlight, failed.Load(), len(ids))
}
