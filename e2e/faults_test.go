package e2e

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/testutil"
)

// errorKinds counts the errors clients saw, by kind.
type errorKinds struct {
	mu sync.Mutex // protects n
	n  map[string]int
}

func (e *errorKinds) add(err error) {
	kind := "other"
	var ae *api.Error
	switch {
	case errors.Is(err, api.ErrNoResponders):
		kind = "no_responders"
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, api.ErrTimedOut):
		kind = "timeout"
	case errors.As(err, &ae):
		kind = string(ae.Code)
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.n == nil {
		e.n = map[string]int{}
	}
	e.n[kind]++
}

func (e *errorKinds) String() string {
	e.mu.Lock()
	defer e.mu.Unlock()
	var parts []string
	total := 0
	for k, v := range e.n {
		parts = append(parts, fmt.Sprintf("%s=%d", k, v))
		total += v
	}
	sort.Strings(parts)
	return fmt.Sprintf("%d (%s)", total, strings.Join(parts, " "))
}

// readyz returns a replica's /readyz status code (0 when unreachable).
func readyz(base string) int {
	c := http.Client{Timeout: 2 * time.Second}
	resp, err := c.Get(base + "/readyz")
	if err != nil {
		return 0
	}
	resp.Body.Close()
	return resp.StatusCode
}

// TestFaultPostgresRestartUnderLoad is the fault test "restart
// Postgres under load": two `gpuaas controld` processes serve a stream of
// alloc.get and alloc.create (each create retried with its key until it
// succeeds) while their Postgres is stopped for 2 s and started again.
// Both processes stay up (the same PIDs), /readyz of each goes not ready
// then ready, every create succeeds exactly once, and requests succeed
// again. Figures: time to recover after Postgres returns (the goal is
// < 10 s), client-visible errors during the outage.
func TestFaultPostgresRestartUnderLoad(t *testing.T) {
	c := startFaultCluster(t, 2)
	replicas := []*faultProc{c.procs[1], c.procs[2]}
	pids := []int{replicas[0].cmd.Process.Pid, replicas[1].cmd.Process.Pid}
	cl := c.client()
	first, err := cl.AllocCreate(t.Context(), api.AllocCreateRequest{Project: "faults", SKU: "h200-slice", GPUs: 1, Queue: true})
	if err != nil {
		t.Fatalf("first create: %v", err)
	}

	// Each replica's readiness as it changes.
	var sawNotReady [2]atomic.Bool
	var readyAgain [2]atomic.Int64 // unix nanos of the last not-ready → ready
	watchCtx, stopWatch := context.WithCancel(context.Background())
	var watchers sync.WaitGroup
	for i, p := range replicas {
		watchers.Add(1)
		go func() {
			defer watchers.Done()
			wasReady := true
			for watchCtx.Err() == nil {
				ok := readyz(p.metrics) == http.StatusOK
				if !ok {
					sawNotReady[i].Store(true)
				} else if !wasReady {
					readyAgain[i].Store(time.Now().UnixNano())
				}
				wasReady = ok
				time.Sleep(50 * time.Millisecond)
			}
		}()
	}

	// The load: 2 workers, each an alloc.get then an alloc.create with a
	// fresh key, retried with that key until it succeeds.
	var (
		outage                atomic.Bool
		gets, creates, errTot atomic.Int64
		duringOutage          errorKinds
		afterOutage           errorKinds
		lastErr               atomic.Int64 // unix nanos of the last client error
		created               sync.Map     // key → allocation id
	)
	note := func(err error) {
		lastErr.Store(time.Now().UnixNano())
		errTot.Add(1)
		if outage.Load() {
			duringOutage.add(err)
		} else {
			afterOutage.add(err)
		}
	}
	loadCtx, stopLoad := context.WithCancel(context.Background())
	var workers sync.WaitGroup
	for w := range 2 {
		workers.Add(1)
		go func() {
			defer workers.Done()
			for i := 0; loadCtx.Err() == nil; i++ {
				if _, err := cl.AllocGet(context.Background(), first.ID); err != nil {
					note(err)
				} else {
					gets.Add(1)
				}
				key := fmt.Sprintf("pgrestart-%d-%d", w, i)
				for {
					a, err := cl.AllocCreate(context.Background(), api.AllocCreateRequest{Project: "faults", SKU: "h200-slice", GPUs: 1, Queue: true},
						api.WithIdempotencyKey(key))
					if err == nil {
						created.Store(key, a.ID)
						creates.Add(1)
						break
					}
					note(err)
					time.Sleep(100 * time.Millisecond)
				}
				time.Sleep(25 * time.Millisecond) // under the per-user rate limit
			}
		}()
	}
	testutil.Eventually(t, "some load before the restart", func() bool { return creates.Load() >= 10 })

	outage.Store(true)
	stopped, started := c.restartPostgres(2 * time.Second)
	okAfter := creates.Load()
	// Ready again after the stop: Postgres accepts connections a moment
	// before its start returns, and a replica's /readyz may turn ready in
	// that moment (on a loaded machine, it did).
	c.waitFor("both replicas ready again and requests succeeding", func() bool {
		return readyAgain[0].Load() > stopped.UnixNano() && readyAgain[1].Load() > stopped.UnixNano() &&
			creates.Load() >= okAfter+10
	})
	outage.Store(false)
	// A little more load, to see errors stop.
	more := creates.Load()
	c.waitFor("more requests after the recovery", func() bool { return creates.Load() >= more+10 })
	// Each loop that failed logs its recovery once it has run a while.
	for _, p := range replicas {
		c.waitFor(p.name+" logging the recovery of every loop that failed", func() bool {
			out := p.out.String()
			return strings.Count(out, "failed; restarting") == strings.Count(out, " recovered")
		})
	}
	stopLoad()
	workers.Wait()
	stopWatch()
	watchers.Wait()

	for i, p := range replicas {
		if p.exited() || p.cmd.Process.Pid != pids[i] {
			t.Errorf("%s exited during the Postgres restart; want it up (pid %d)", p.name, pids[i])
		}
		if !sawNotReady[i].Load() {
			t.Errorf("%s: /readyz never said not ready while Postgres was down", p.name)
		}
	}
	// Every create succeeded once: its key names one allocation, and the
	// database holds exactly those.
	n := 0
	created.Range(func(_, _ any) bool { n++; return true })
	list, err := cl.AllocList(t.Context(), api.AllocListRequest{Project: "faults", All: true})
	if err != nil {
		t.Fatal(err)
	}
	if len(list.Allocations) != n+1 {
		t.Errorf("%d allocations in the project; want %d (each create once, and the first)", len(list.Allocations), n+1)
	}
	ready := time.Unix(0, max(readyAgain[0].Load(), readyAgain[1].Load()))
	lastError := time.Unix(0, lastErr.Load())
	t.Logf("postgres down %v; both replicas ready %v after it was back; last client error %v after it was back",
		started.Sub(stopped).Round(time.Millisecond), ready.Sub(started).Round(time.Millisecond), lastError.Sub(started).Round(time.Millisecond))
	t.Logf("requests: %d gets and %d creates ok; client-visible errors from the stop until both were ready again: %s; outside that: %s",
		gets.Load(), creates.Load(), duringOutage.String(), afterOutage.String())
	for _, p := range replicas {
		out := p.out.String()
		var lines []string
		for _, l := range strings.Split(out, "\n") {
			if strings.Contains(l, "failed; restarting") || strings.Contains(l, " recovered") {
				lines = append(lines, l)
			}
		}
		t.Logf("%s (pid %d, still running): %d outage and recovery lines:\n%s", p.name, p.cmd.Process.Pid, len(lines), strings.Join(lines, "\n"))
	}
}

// TestFaultNATSRestartUnderLoad restarts the nats-server (SIGTERM, 2 s
// down, started again on its JetStream store) under a stream of
// alloc.create requests (each retried with its key until it succeeds) on
// an instant hostd agent: both `gpuaas controld` processes stay up, each
// logs the outage once and the reconnect with its duration, every create
// succeeds once and every allocation becomes active (hostd reconnected,
// tasks dispatched, the fan-out delivering). Figures: time from the
// server's return to the first request served, client-visible errors.
func TestFaultNATSRestartUnderLoad(t *testing.T) {
	c := startFaultCluster(t, 2)
	replicas := []*faultProc{c.procs[1], c.procs[2]}
	pids := []int{replicas[0].cmd.Process.Pid, replicas[1].cmd.Process.Pid}
	cl := c.client()
	startInstantHosts(t, c, cl, 1, 64)

	var (
		outage      atomic.Bool
		creates     atomic.Int64
		duringOut   errorKinds
		outside     errorKinds
		firstOK     atomic.Int64 // unix nanos of the first success after the restart
		restartedAt atomic.Int64
		created     sync.Map
	)
	loadCtx, stopLoad := context.WithCancel(context.Background())
	var workers sync.WaitGroup
	for w := range 2 {
		workers.Add(1)
		go func() {
			defer workers.Done()
			for i := 0; loadCtx.Err() == nil && i < 30; i++ {
				key := fmt.Sprintf("natsrestart-%d-%d", w, i)
				for {
					ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
					a, err := cl.AllocCreate(ctx, api.AllocCreateRequest{Project: "faults", SKU: "h200-slice", GPUs: 1},
						api.WithIdempotencyKey(key))
					cancel()
					if err == nil {
						created.Store(key, a.ID)
						creates.Add(1)
						if r := restartedAt.Load(); r != 0 {
							firstOK.CompareAndSwap(0, time.Now().UnixNano())
						}
						break
					}
					if outage.Load() {
						duringOut.add(err)
					} else {
						outside.add(err)
					}
					time.Sleep(100 * time.Millisecond)
				}
				time.Sleep(50 * time.Millisecond)
			}
		}()
	}
	testutil.Eventually(t, "some load before the restart", func() bool { return creates.Load() >= 10 })
	outage.Store(true)
	stopped, started := c.restartNATS(2 * time.Second)
	restartedAt.Store(started.UnixNano())
	c.waitFor("a request served after the restart", func() bool { return firstOK.Load() != 0 })
	outage.Store(false)
	workers.Wait()
	stopLoad()

	for i, p := range replicas {
		if p.exited() || p.cmd.Process.Pid != pids[i] {
			t.Errorf("%s exited during the NATS restart; want it up (pid %d)", p.name, pids[i])
		}
		c.waitFor(p.name+" logging its reconnect", func() bool { return strings.Contains(p.out.String(), "nats reconnected") })
	}
	n := 0
	created.Range(func(_, _ any) bool { n++; return true })
	if n != 60 {
		t.Errorf("%d creates succeeded; want 60", n)
	}
	c.waitFor("every allocation active", func() bool {
		list, err := cl.AllocList(t.Context(), api.AllocListRequest{Project: "faults", All: true})
		if err != nil {
			return false
		}
		active := 0
		for _, a := range list.Allocations {
			if a.State == api.AllocActive {
				active++
			}
		}
		return len(list.Allocations) == n && active == n
	})
	t.Logf("nats down %v; first request served %v after it was back; %d creates, all active, each once",
		started.Sub(stopped).Round(time.Millisecond), time.Unix(0, firstOK.Load()).Sub(started).Round(time.Millisecond), n)
	t.Logf("client-visible errors from the stop to the first request served: %s; outside that: %s", duringOut.String(), outside.String())
	for _, p := range replicas {
		var lines []string
		for _, l := range strings.Split(p.out.String(), "\n") {
			if strings.Contains(l, "nats disconnected") || strings.Contains(l, "nats reconnected") ||
				strings.Contains(l, "failed; restarting") || strings.Contains(l, " recovered") {
				lines = append(lines, l)
			}
		}
		t.Logf("%s (pid %d, still running):\n%s", p.name, p.cmd.Process.Pid, strings.Join(lines, "\n"))
	}
}
