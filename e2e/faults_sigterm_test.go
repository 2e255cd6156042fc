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
)

// TestFaultSIGTERMOfSingletonHolderUnderLoad is the fault test
// "SIGTERM of the singleton holder under load", with separate processes:
// two `gpuaas controld` replicas, 8 clients creating, reading and
// releasing allocations on instant hosts, and SIGTERM to the replica
// holding the outbox relay. Every request gets a reply (no client error
// at all), the stopped replica exits 0 after its drain with no `context
// canceled` in its log, and the other takes the relay over. Figures: the
// relay's failover time, the drain's duration, requests served before
// and after the signal.
func TestFaultSIGTERMOfSingletonHolderUnderLoad(t *testing.T) {
	const workers = 8
	c := startFaultCluster(t, 2)
	cl := c.client()
	startInstantHosts(t, c, cl, 4, 64)

	holder, survivor := c.relayHolder(1)

	var (
		served, afterSignal atomic.Int64
		signalled           atomic.Bool
		errs                errorKinds
		stop                = make(chan struct{})
		wg                  sync.WaitGroup
	)
	call := func(err error) bool {
		if err != nil {
			errs.add(err)
			t.Logf("client error: %v", err)
			return false
		}
		served.Add(1)
		if signalled.Load() {
			afterSignal.Add(1)
		}
		return true
	}
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				key := fmt.Sprintf("sigterm-%d-%d", w, i)
				a, err := cl.AllocCreate(context.Background(), api.AllocCreateRequest{Project: "faults", SKU: "h200-slice", GPUs: 1},
					api.WithIdempotencyKey(key))
				if !call(err) {
					continue
				}
				_, err = cl.AllocGet(context.Background(), a.ID)
				call(err)
				_, err = cl.AllocRelease(context.Background(), api.AllocReleaseRequest{ID: a.ID}, api.WithIdempotencyKey(key+"-r"))
				call(err)
			}
		}()
	}
	c.waitFor("load before the signal", func() bool { return served.Load() >= 60 })
	before := served.Load()
	name := holder.name
	holder.name += " (killed)" // stopped on purpose: waitFor must not fail on its exit
	signalled.Store(true)
	sentAt := time.Now()
	if err := syscall.Kill(holder.cmd.Process.Pid, syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	var exitErr error
	select {
	case exitErr = <-holder.done:
		holder.done <- exitErr
	case <-time.After(2 * time.Minute):
		t.Fatalf("%s still running 2 minutes after SIGTERM", name)
	}
	drained := time.Since(sentAt)
	failover := c.relayTakenOver(survivor, sentAt)
	c.waitFor("load after the signal", func() bool { return afterSignal.Load() >= 60 })
	close(stop)
	wg.Wait()

	if exitErr != nil {
		t.Errorf("%s exited with %v after SIGTERM; want 0 after its drain", name, exitErr)
	}
	if out := holder.out.String(); strings.Contains(out, "context canceled") {
		t.Errorf("%s logged `context canceled` while draining:\n%s", name, out)
	}
	if errs.String() != "0 ()" {
		t.Errorf("clients saw errors: %s; want every request answered", errs.String())
	}
	t.Logf("SIGTERM to %s under %d-way load: %d requests served before, %d after; client errors %s",
		name, workers, before, afterSignal.Load(), errs.String())
	t.Logf("drain and exit took %v; outbox relay failover to %s: %v", drained.Round(time.Millisecond), survivor.name, failover.Round(time.Millisecond))
}
