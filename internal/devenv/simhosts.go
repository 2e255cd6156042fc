package devenv

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/gpuaas/gpuaas/controld"
	"github.com/gpuaas/gpuaas/hostd/agent"
	"github.com/gpuaas/gpuaas/hostd/sim"
	"github.com/gpuaas/gpuaas/hostd/tasks"
	"github.com/gpuaas/gpuaas/hostd/term"
	"github.com/gpuaas/gpuaas/internal/api"
)

// hostsReadyTimeout bounds the wait for the sim hosts to be enrolled,
// discovered and ready.
const hostsReadyTimeout = 2 * time.Minute

// simFleet is the simulated hosts, each a real hostd agent with the sim's
// hardware and a terminal server on loopback, in this process.
type simFleet struct {
	names     []string
	cancel    context.CancelFunc
	wg        sync.WaitGroup
	hosts     []*sim.Host
	terminals []*Terminal
	failed    chan error
}

// SimHostSpec names the i-th host: slice hosts and bare-metal hosts
// alternate, starting with a slice host.
func SimHostSpec(i int) (name, shape string, profile sim.Profile) {
	if i%2 == 0 {
		p := sim.H200Slice8()
		return fmt.Sprintf("sim-slice-%d", i+1), p.Shape, p
	}
	p := sim.H100Baremetal8()
	return fmt.Sprintf("sim-metal-%d", i+1), p.Shape, p
}

// startSimHosts starts cfg.Hosts sim hostds. A host that has no identity
// yet is enrolled with a fresh token, as an operator would.
func startSimHosts(ctx context.Context, srv *controld.Server, adminID, natsURL string, cfg Config, vm *vmHost) (*simFleet, error) {
	ctx, cancel := context.WithCancel(ctx)
	f := &simFleet{cancel: cancel, failed: make(chan error, cfg.Hosts)}
	for i := range cfg.Hosts {
		if err := f.start(ctx, i, srv, adminID, natsURL, cfg, vm); err != nil {
			f.stop()
			return nil, err
		}
	}
	return f, nil
}

// start starts the i-th host.
func (f *simFleet) start(ctx context.Context, i int, srv *controld.Server, adminID, natsURL string, cfg Config, vm *vmHost) error {
	name, shape, profile := SimHostSpec(i)
	dir := filepath.Join(cfg.DataDir, "hosts", name)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	token := ""
	if _, err := os.Stat(filepath.Join(dir, "identity.json")); errors.Is(err, os.ErrNotExist) {
		tok, err := srv.IssueEnrollToken(ctx, api.EnrollTokenRequest{Name: name, Shape: shape, Test: true}, adminID) // test nodes: docs/slices.md, "Driver check"
		if err != nil {
			return fmt.Errorf("enroll %s: %w (its state in %s is gone; start over with --reset)", name, err, dir)
		}
		token = tok.Token
	}
	h, err := sim.NewHostWith(dir, profile, name, sim.Options{SystemUsers: cfg.SystemUsers})
	if err != nil {
		return err
	}
	f.hosts = append(f.hosts, h)
	hlog := cfg.Log.With("host", name)
	env := h.Env("", hlog)
	if vm != nil && i == 0 { // gpuaas dev --vm: real guests (vmhost.go)
		if err := openStateDir(cfg.DataDir, dir); err != nil {
			return err
		}
		if err := vm.use(env, h.Users.Accounts()); err != nil {
			return err
		}
	}
	// A fresh loopback port each start: the heartbeat reports it.
	ts, err := StartTerminal(TerminalConfig{Listen: "127.0.0.1:0",
		Config: term.Config{StateDir: dir, Accounts: h.Users.Accounts(), Hypervisor: env.Hypervisor, Volumes: env.Volumes, Log: hlog}})
	if err != nil {
		return err
	}
	f.terminals = append(f.terminals, ts)
	acfg := agent.Config{Server: natsURL, StateDir: dir, Token: token, Env: env,
		Handlers: tasks.Default(), Hostname: name, Log: hlog}
	ts.Attach(&acfg)
	a, err := agent.New(acfg)
	if err != nil {
		return err
	}
	f.names = append(f.names, name)
	f.wg.Add(1)
	go func() {
		defer f.wg.Done()
		if err := a.Run(ctx); err != nil {
			f.failed <- fmt.Errorf("%s: %w", name, err)
		}
	}()
	return nil
}

// waitReady waits until every sim host is enrolled, discovered and ready.
func (f *simFleet) waitReady(ctx context.Context, srv *controld.Server) error {
	deadline := time.Now().Add(hostsReadyTimeout)
	for {
		missing, err := f.notReady(ctx, srv)
		if err != nil {
			return err
		}
		if missing == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%d simulated hosts did not become ready", missing)
		}
		select {
		case err := <-f.failed:
			return fmt.Errorf("simulated host stopped: %w", err)
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// notReady counts the fleet's hosts that are not ready with slots yet.
func (f *simFleet) notReady(ctx context.Context, srv *controld.Server) (int, error) {
	nodes, err := srv.Nodes(ctx)
	if err != nil {
		return 0, err
	}
	ready := map[string]bool{}
	for _, n := range nodes {
		if n.State == api.NodeReady && n.SlotsTotal > 0 {
			ready[n.Name] = true
		}
	}
	missing := 0
	for _, name := range f.names {
		if !ready[name] {
			missing++
		}
	}
	return missing, nil
}

// stop ends the hostds and their terminal servers and stops the sim
// guests' SSH servers; the sim's system users are removed.
func (f *simFleet) stop() {
	f.cancel()
	f.wg.Wait()
	for _, t := range f.terminals {
		_ = t.Stop()
	}
	for _, h := range f.hosts {
		_ = h.Close()
	}
}
