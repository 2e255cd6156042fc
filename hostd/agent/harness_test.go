package agent_test

import (
	"context"
	"crypto/ed25519"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/gpuaas/gpuaas/controld"
	"github.com/gpuaas/gpuaas/controld/controldtest"
	"github.com/gpuaas/gpuaas/hostd/agent"
	"github.com/gpuaas/gpuaas/hostd/tasks"
	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/hostproto"
	"github.com/gpuaas/gpuaas/internal/testutil"
)

// fakeHost is a task registry whose handlers the test steers: they stand
// in for the host work (covered by hostd/tasks), so these tests exercise
// the agent's protocol with controld.
type fakeHost struct {
	// mu protects runs.
	mu   sync.Mutex
	runs map[string]int // task type → runs
	// block, when set, makes vm_provision wait in its "define_start" phase
	// until ctx ends or the channel is closed.
	block chan struct{}
	// failProvision makes vm_provision fail in its "define_start" phase.
	failProvision bool
	// blockRelease, when set, makes vm_release wait until ctx ends or the
	// channel is closed.
	blockRelease chan struct{}
}

func newFakeHost() *fakeHost { return &fakeHost{runs: map[string]int{}} }

func (f *fakeHost) count(typ string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.runs[typ]
}

func (f *fakeHost) registry() tasks.Registry {
	note := func(typ string) {
		f.mu.Lock()
		f.runs[typ]++
		f.mu.Unlock()
	}
	return tasks.Registry{
		api.TaskHealthProbe: func(context.Context, *tasks.Env, json.RawMessage, tasks.Reporter) (any, error) {
			note(api.TaskHealthProbe)
			return map[string]any{"kernel": "6.1.0-test"}, nil
		},
		api.TaskTopologyDiscover: func(_ context.Context, env *tasks.Env, _ json.RawMessage, _ tasks.Reporter) (any, error) {
			note(api.TaskTopologyDiscover)
			r := api.TopologyResult{HostName: env.NodeName, GPUs: []api.GPUInfo{{PCI: "0000:18:00.0", Model: "H200"}}}
			for i := range 8 {
				r.CandidateSlots = append(r.CandidateSlots, api.CandidateSlot{Index: i, GPUPCI: fmt.Sprintf("0000:%02x:00.0", 0x18+i*0x10),
					NUMANode: i / 4, MAC: fmt.Sprintf("02:00:00:00:00:%02x", i), IP: fmt.Sprintf("10.77.1.%d", 10+i),
					GPUUUID: fmt.Sprintf("GPU-%08x-0000-0000-0000-000000000000", i)})
			}
			return r, nil
		},
		api.TaskVMProvision: tasks.Typed(func(ctx context.Context, env *tasks.Env, p hostproto.VMProvisionParams, rep tasks.Reporter) (any, error) {
			note(api.TaskVMProvision)
			ph := tasks.NewPhased(env, rep)
			if err := ph.Run(ctx, "lease", func(context.Context) error { return nil }, nil); err != nil {
				return nil, err
			}
			err := ph.Run(ctx, "define_start", func(ctx context.Context) error {
				if f.failProvision {
					return errors.New("simulated define failure")
				}
				if f.block == nil {
					return nil
				}
				select {
				case <-ctx.Done():
					return ctx.Err()
				case <-f.block:
					return nil
				}
			}, nil)
			if err != nil {
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
		api.TaskVMRelease: func(ctx context.Context, _ *tasks.Env, _ json.RawMessage, _ tasks.Reporter) (any, error) {
			note(api.TaskVMRelease)
			if f.blockRelease != nil {
				select {
				case <-ctx.Done():
					return nil, ctx.Err()
				case <-f.blockRelease:
				}
			}
			return nil, nil
		},
	}
}

// fleet is controld with hostd enrollment tuned for tests.
func fleet(t testing.TB, hosts controld.HostsConfig) (*controldtest.Env, *api.Client) {
	t.Helper()
	if hosts.HeartbeatInterval == 0 {
		hosts.HeartbeatInterval = 200 * time.Millisecond
	}
	hosts.AutoApproveSlots = true
	env := controldtest.Start(t, controldtest.Options{NoNodes: true, Hosts: hosts})
	return env, env.UserClient(t, env.Admin.ID, env.AdminToken)
}

// runningAgent is an agent started by the test.
type runningAgent struct {
	*agent.Agent
	stop func()
}

// startAgent runs an agent on stateDir until stop or the test's end;
// tune, when given, adjusts its configuration.
func startAgent(t testing.TB, env *controldtest.Env, stateDir, token string, reg tasks.Registry, tune ...func(*agent.Config)) *runningAgent {
	t.Helper()
	return startAgentLogging(t, env, stateDir, token, reg, testutil.Logger(t), tune...)
}

// startAgentLogging is startAgent with the agent's logger.
func startAgentLogging(t testing.TB, env *controldtest.Env, stateDir, token string, reg tasks.Registry, log *slog.Logger, tune ...func(*agent.Config)) *runningAgent {
	t.Helper()
	cfg := agent.Config{Server: env.NATSURL, StateDir: stateDir, Token: token, Env: &tasks.Env{},
		Handlers: reg, Log: log}
	for _, f := range tune {
		f(&cfg)
	}
	a, err := agent.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx) }()
	var once sync.Once
	stop := func() {
		once.Do(func() {
			cancel()
			if err := <-done; err != nil {
				t.Errorf("agent: %v", err)
			}
		})
	}
	t.Cleanup(stop)
	select {
	case <-a.Ready():
	case err := <-done:
		done <- err
		t.Fatalf("agent stopped: %v", err)
	case <-time.After(20 * time.Second):
		t.Fatal("agent did not get ready")
	}
	return &runningAgent{a, stop}
}

// enroll makes a token for a node.
func enroll(t testing.TB, c *api.Client, name string) string {
	t.Helper()
	tok, err := c.NodeEnroll(context.Background(), api.EnrollTokenRequest{Name: name, Shape: api.ShapeGPUSlice})
	if err != nil {
		t.Fatal(err)
	}
	return tok.Token
}

// waitAlloc waits for an allocation to reach state.
func waitAlloc(t testing.TB, c *api.Client, id, state string) *api.Allocation {
	t.Helper()
	var a *api.Allocation
	testutil.Eventually(t, id+" to be "+state, func() bool {
		var err error
		a, err = c.AllocGet(context.Background(), id)
		return err == nil && a.State == state
	})
	return a
}

// readyNode waits for the agent's node to be ready with 8 free slots.
func readyNode(t testing.TB, c *api.Client, nodeID string) {
	t.Helper()
	testutil.Eventually(t, "node ready", func() bool {
		d, err := c.NodeGet(context.Background(), nodeID)
		return err == nil && d.Node.State == api.NodeReady && d.Node.SlotsFree == 8
	})
}

// taskKey reads controld's task signing key from its database.
func taskKey(t testing.TB, env *controldtest.Env) ed25519.PrivateKey {
	t.Helper()
	var seed []byte
	if err := env.Server.Pool().QueryRow(context.Background(),
		`SELECT private_key FROM controld_keys WHERE name = 'task-signing'`).Scan(&seed); err != nil {
		t.Fatal(err)
	}
	return ed25519.NewKeyFromSeed(seed)
}

// nodePublicKey reads a node's enrolled key from controld's database.
func nodePublicKey(t testing.TB, env *controldtest.Env, nodeID string) ed25519.PublicKey {
	t.Helper()
	var raw []byte
	if err := env.Server.Pool().QueryRow(context.Background(),
		`SELECT public_key FROM nodes WHERE id = $1`, nodeID).Scan(&raw); err != nil {
		t.Fatal(err)
	}
	return ed25519.PublicKey(raw)
}
