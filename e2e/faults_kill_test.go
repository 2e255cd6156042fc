package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/gpuaas/gpuaas/hostd/agent"
	"github.com/gpuaas/gpuaas/hostd/tasks"
	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/bus"
	"github.com/gpuaas/gpuaas/internal/devenv/controlplane"
	"github.com/gpuaas/gpuaas/internal/hostproto"
)

// instantHost is a task registry that provisions at once: the hosts of
// the kill test are real hostd agents (enrollment, signed tasks, results
// over NATS) whose host work takes no time, with slots GPU slots each.
func instantHost(slots int) tasks.Registry {
	return tasks.Registry{
		api.TaskHealthProbe: func(context.Context, *tasks.Env, json.RawMessage, tasks.Reporter) (any, error) {
			return map[string]any{"kernel": "6.8.0-sim"}, nil
		},
		api.TaskTopologyDiscover: func(_ context.Context, env *tasks.Env, _ json.RawMessage, _ tasks.Reporter) (any, error) {
			r := api.TopologyResult{HostName: env.NodeName, GPUs: []api.GPUInfo{{PCI: "0000:18:00.0", Model: "H200"}}}
			for i := range slots {
				r.CandidateSlots = append(r.CandidateSlots, api.CandidateSlot{Index: i, GPUPCI: fmt.Sprintf("0000:%02x:%02x.0", 0x18+i/8, i%8),
					NUMANode: i % 2, MAC: fmt.Sprintf("02:00:00:00:%02x:%02x", i/256, i%256), IP: fmt.Sprintf("10.77.%d.%d", 1+i/200, 10+i%200),
					GPUUUID: fmt.Sprintf("GPU-%08x-0000-0000-0000-000000000000", i)})
			}
			return r, nil
		},
		api.TaskVMProvision: tasks.Typed(func(ctx context.Context, env *tasks.Env, p hostproto.VMProvisionParams, rep tasks.Reporter) (any, error) {
			ph := tasks.NewPhased(env, rep)
			if err := ph.Run(ctx, "define_start", func(context.Context) error { return nil }, nil); err != nil {
				return nil, err
			}
			// The stand-in guest's driver check lists the slots' GPUs
			// (controld checks them before active: docs/slices.md).
			check := &api.DriverCheck{Passed: true, Message: "ok: stand-in host"}
			for _, s := range p.Slots {
				check.UUIDs = append(check.UUIDs, s.GPUUUID)
			}
			return hostproto.VMProvisionResult{Domain: p.AllocationID, Address: "127.0.0.1:22", DriverCheck: check}, nil
		}),
		api.TaskVMRelease: func(context.Context, *tasks.Env, json.RawMessage, tasks.Reporter) (any, error) {
			return nil, nil
		},
	}
}

// startInstantHosts enrolls and runs n hostd agents of slots slots each,
// approves their slots and waits until they are ready.
func startInstantHosts(t *testing.T, c *faultCluster, cl *api.Client, n, slots int) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	t.Cleanup(func() { cancel(); wg.Wait() })
	for i := range n {
		name := fmt.Sprintf("instant-%d", i+1)
		tok, err := cl.NodeEnroll(t.Context(), api.EnrollTokenRequest{Name: name, Shape: api.ShapeGPUSlice})
		if err != nil {
			t.Fatal(err)
		}
		dir := filepath.Join(c.root, "hosts", name)
		if err := os.MkdirAll(dir, 0o700); err != nil {
			t.Fatal(err)
		}
		a, err := agent.New(agent.Config{Server: c.natsURL, StateDir: dir, Token: tok.Token, Env: &tasks.Env{},
			Handlers: instantHost(slots), Hostname: name, Log: slog.New(slog.DiscardHandler)})
		if err != nil {
			t.Fatal(err)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := a.Run(ctx); err != nil && ctx.Err() == nil {
				t.Errorf("%s: %v", name, err)
			}
		}()
		c.waitFor(name+" pending slots", func() bool {
			d, err := cl.NodeGet(t.Context(), name)
			return err == nil && d.Node.SlotsPending == slots
		})
		if _, err := cl.SlotsApprove(t.Context(), api.SlotsApproveRequest{Node: name}); err != nil {
			t.Fatal(err)
		}
		c.waitFor(name+" ready", func() bool {
			d, err := cl.NodeGet(t.Context(), name)
			return err == nil && d.Node.State == api.NodeReady && d.Node.SlotsFree == slots
		})
	}
}

// TestFaultKillControldDuringCreates is the fault test "kill -9 a
// controld replica during 500 creates": 16 workers create 500
// allocations, each retried with the same idempotency key after an error
// (a timeout, no responders, unavailable) until it succeeds, while the
// replica holding the outbox relay is killed with SIGKILL. Afterwards:
// 0 duplicates, 0 lost, every allocation active on the instant hosts, the
// outbox drained (no pending row; the stream holds as many messages as
// rows were published) and `gpuaas ops ledger verify` passes. Figures:
// the errors clients saw, and the relay's failover time.
func TestFaultKillControldDuringCreates(t *testing.T) {
	const creates, workers = 500, 16
	c := startFaultCluster(t, 2)
	cl := c.client()
	startInstantHosts(t, c, cl, 8, 64)

	holder, survivor := c.relayHolder(1)

	keys := make(chan int)
	var (
		done     atomic.Int64
		errs     errorKinds
		attempts atomic.Int64
		mu       sync.Mutex // protects byKey
		byKey    = map[int]string{}
	)
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for k := range keys {
				key := fmt.Sprintf("kill-test-%d", k)
				for try := 0; ; try++ {
					if try == 100 {
						t.Errorf("create %s: still failing after %d tries", key, try)
						break
					}
					attempts.Add(1)
					ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
					a, err := cl.AllocCreate(ctx, api.AllocCreateRequest{Project: "faults", SKU: "h200-slice", GPUs: 1},
						api.WithIdempotencyKey(key))
					cancel()
					if err == nil {
						mu.Lock()
						byKey[k] = a.ID
						mu.Unlock()
						done.Add(1)
						break
					}
					errs.add(err)
					time.Sleep(100 * time.Millisecond)
				}
			}
		}()
	}
	start := time.Now()
	var killedAt time.Time
	for k := range creates {
		if k == creates/4 {
			holder.kill(t)
			killedAt = time.Now()
		}
		keys <- k
	}
	close(keys)
	failover := c.relayTakenOver(survivor, killedAt)
	wg.Wait()
	elapsed := time.Since(start)
	if t.Failed() {
		return
	}

	// 0 lost, 0 duplicates: each key has its allocation, all distinct,
	// and the project holds exactly those.
	ids := map[string]bool{}
	for _, id := range byKey {
		ids[id] = true
	}
	if len(byKey) != creates || len(ids) != creates {
		t.Errorf("%d keys answered with %d distinct allocations; want %d of each", len(byKey), len(ids), creates)
	}
	var list *api.AllocListResponse
	c.waitFor("every allocation active", func() bool {
		var err error
		list, err = cl.AllocList(t.Context(), api.AllocListRequest{Project: "faults", All: true})
		if err != nil {
			return false
		}
		active := 0
		for _, a := range list.Allocations {
			if a.State == api.AllocActive {
				active++
			}
		}
		return active == creates
	})
	if len(list.Allocations) != creates {
		t.Errorf("%d allocations in the project; want %d", len(list.Allocations), creates)
	}
	for _, a := range list.Allocations {
		if !ids[a.ID] {
			t.Errorf("allocation %s answered no key (a duplicate)", a.ID)
		}
	}

	// The outbox drained into the stream, each row once.
	conn, err := pgx.Connect(t.Context(), c.dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	keysDir, err := bus.LoadKeys(c.keys)
	if err != nil {
		t.Fatal(err)
	}
	conns, err := controlplane.ConnectControld(c.natsURL, bus.TLS{}, keysDir)
	if err != nil {
		t.Fatal(err)
	}
	defer conns.Close()
	js, err := jetstream.New(conns.NC)
	if err != nil {
		t.Fatal(err)
	}
	var pending, published int64
	var msgs uint64
	c.waitFor("the outbox drained", func() bool {
		if err := conn.QueryRow(t.Context(), `SELECT count(*) FILTER (WHERE state = 'pending'), count(*) FILTER (WHERE state = 'published') FROM outbox_events`).
			Scan(&pending, &published); err != nil {
			t.Fatal(err)
		}
		s, err := js.Stream(t.Context(), api.EventStreamName)
		if err != nil {
			return false
		}
		info, err := s.Info(t.Context())
		if err != nil {
			return false
		}
		msgs = info.State.Msgs
		return pending == 0 && uint64(published) == msgs
	})
	out := c.cli("ops", "ledger", "verify")
	t.Logf("ledger verify: %s", strings.TrimSpace(out))

	t.Logf("%d creates (16-way) in %v with %s killed at create %d: %d attempts; errors clients saw: %s",
		creates, elapsed.Round(time.Millisecond), holder.name, creates/4, attempts.Load(), errs.String())
	t.Logf("0 duplicates, 0 lost: %d keys → %d allocations, all active; outbox: %d published, %d pending, stream %d messages",
		len(byKey), len(ids), published, pending, msgs)
	t.Logf("outbox relay failover: %v from the kill to %s's \"outbox relay active\" (its lock poll included)", failover.Round(time.Millisecond), survivor.name)
}
