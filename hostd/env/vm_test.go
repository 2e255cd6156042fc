package env_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gpuaas/gpuaas/hostd/env"
	"github.com/gpuaas/gpuaas/hostd/host"
	"github.com/gpuaas/gpuaas/hostd/sim"
	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/sshtest"
)

// startVM provisions allocation alloc's VM the way slice.vm_provision
// leaves it: the per-VM key, a seed authorizing it for the POSIX user,
// and a running sim domain (an SSH server on loopback).
func startVM(t *testing.T, stateDir, alloc string) *sim.Hypervisor {
	t.Helper()
	hv, err := sim.NewHypervisor(filepath.Join(stateDir, "sim", "hypervisor"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = hv.Close() })
	key := sshtest.NewKey(t)
	seed := env.SeedDir(stateDir, alloc)
	mustWrite(t, env.VMKeyPath(stateDir, alloc), string(sshtest.PrivateKeyPEM(t, key, "gpuaas-hostd@"+alloc)))
	ud := "#cloud-config\nusers:\n  - name: " + api.PosixUser(alloc) + "\n    ssh_authorized_keys:\n      - " +
		sshtest.AuthorizedKey(sshtest.SignerOf(t, key).PublicKey()) + "\n"
	mustWrite(t, filepath.Join(seed, "user-data"), ud)
	mustWrite(t, filepath.Join(seed, "seed.iso"), "iso")
	ctx := context.Background()
	spec := host.DomainSpec{Name: alloc, VCPUs: 1, MemoryMiB: 512, NUMANode: -1, SeedISO: filepath.Join(seed, "seed.iso")}
	if err := hv.Define(ctx, spec); err != nil {
		t.Fatal(err)
	}
	if err := hv.Start(ctx, alloc); err != nil {
		t.Fatal(err)
	}
	return hv
}

func openVM(t *testing.T) (env.Environment, *sim.Hypervisor, string) {
	t.Helper()
	state, alloc := t.TempDir(), "a-vm1"
	hv := startVM(t, state, alloc)
	f := newFactory(t, env.Config{StateDir: state, Hypervisor: hv})
	e, err := f.Open(context.Background(), env.Alloc{ID: alloc, PosixUser: api.PosixUser(alloc), Shape: api.ShapeGPUSlice})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = e.Close() })
	if _, ok := e.(env.Hopper); !ok {
		t.Fatalf("Open(gpu_slice) = %T; want a VM environment (a Hopper)", e)
	}
	return e, hv, alloc
}

func TestVMExec(t *testing.T) {
	e, hv, alloc := openVM(t)
	home := hv.GuestHome(alloc, api.PosixUser(alloc))
	got, st := run(t, e, env.ExecSpec{Command: "pwd; echo out; exit 4"})
	if got != home+"\nout\n" || st.Code != 4 {
		t.Errorf("got %q, %+v; want the guest home, out, code 4", got, st)
	}
	got, st = run(t, e, env.ExecSpec{Argv: []string{"printf", "%s|", "it's", "b"}})
	if got != "it's|b|" || st.Code != 0 {
		t.Errorf("argv: got %q, %+v; want it's|b|", got, st)
	}
	got, _ = run(t, e, env.ExecSpec{Command: "cat", Stdin: strings.NewReader("through the hop")})
	if got != "through the hop" {
		t.Errorf("stdin: got %q", got)
	}
}

func TestVMDialLoopbackStatusAttach(t *testing.T) {
	e, hv, alloc := openVM(t)
	ctx := context.Background()
	// The sim guest's loopback is the host's.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		if c, err := ln.Accept(); err == nil {
			_, _ = c.Write([]byte("from the guest's loopback"))
			_ = c.Close()
		}
	}()
	c, err := e.DialLoopback(ctx, "", ln.Addr().(*net.TCPAddr).Port)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(c)
	_ = c.Close()
	if string(b) != "from the guest's loopback" {
		t.Errorf("got %q", b)
	}
	if _, err := e.DialLoopback(ctx, "192.0.2.1", 22); !errors.Is(err, env.ErrNotLoopback) {
		t.Errorf("another host: got %v; want ErrNotLoopback", err)
	}
	st, err := e.Status(ctx)
	if err != nil || !st.Ready || st.Kind != env.KindVM || st.Detail != string(host.DomainRunning) {
		t.Errorf("running VM: got %+v, %v; want ready, running", st, err)
	}
	if err := hv.Destroy(ctx, alloc); err != nil {
		t.Fatal(err)
	}
	if st, err := e.Status(ctx); err != nil || st.Ready {
		t.Errorf("destroyed VM: got %+v, %v; want not ready", st, err)
	}
	if err := e.Attach(ctx, env.Mount{Name: "data", Source: t.TempDir()}); !errors.Is(err, env.ErrInvalidSpec) {
		t.Errorf("Attach without a guest path: got %v; want ErrInvalidSpec", err)
	}
}

// TestVMHopPinsHostKey: the first hop pins the VM's host key; a VM that
// later presents another one (same per-VM key) is refused.
func TestVMHopPinsHostKey(t *testing.T) {
	state, alloc := t.TempDir(), "a-pin1"
	hv := startVM(t, state, alloc)
	f := newFactory(t, env.Config{StateDir: state, Hypervisor: hv})
	hop := f.VM(alloc, api.PosixUser(alloc)).(env.Hopper)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cc, _, _, err := hop.Hop(ctx)
	if err != nil {
		t.Fatal(err)
	}
	_ = cc.Close()
	pin := filepath.Join(state, "terminal", "vm_host_keys", alloc)
	b, err := os.ReadFile(pin)
	if err != nil {
		t.Fatalf("no pin after the first hop: %v", err)
	}
	// Pin another host key for the same per-VM key: the VM now looks
	// like an impostor.
	var p map[string]string
	if err := json.Unmarshal(b, &p); err != nil {
		t.Fatal(err)
	}
	p["host_key"] = strings.TrimSpace(sshtest.AuthorizedKey(sshtest.SignerOf(t, sshtest.NewKey(t)).PublicKey()))
	b, _ = json.Marshal(p)
	mustWrite(t, pin, string(b))
	if _, _, _, err := hop.Hop(ctx); !errors.Is(err, env.ErrHostKeyChanged) {
		t.Errorf("hop with another pinned host key: got %v; want ErrHostKeyChanged", err)
	}
}

func TestFactoryOpen(t *testing.T) {
	state := t.TempDir()
	ctx := context.Background()
	f := newFactory(t, env.Config{StateDir: state})
	// A slice node without the allocation's VM key has nothing to serve.
	if _, err := f.Open(ctx, env.Alloc{ID: "a-2", PosixUser: "u-a-2", Shape: api.ShapeGPUSlice}); !errors.Is(err, env.ErrNotProvisioned) {
		t.Errorf("slice without a VM key: got %v; want ErrNotProvisioned", err)
	}
	// A node of unknown shape: an allocation with a VM key is a slice,
	// any other bare metal.
	mustWrite(t, env.VMKeyPath(state, "a-2"), "key")
	e, err := f.Open(ctx, env.Alloc{ID: "a-2", PosixUser: "u-a-2"})
	if _, hop := e.(env.Hopper); err != nil || !hop {
		t.Errorf("unknown shape with a VM key: got %T, %v; want a VM environment", e, err)
	}
	e, err = f.Open(ctx, env.Alloc{ID: "a-3", PosixUser: "u-a-3"})
	if _, posix := env.AccountOf(e); err != nil || !posix {
		t.Errorf("unknown shape without a VM key: got %T, %v; want a posix environment", e, err)
	}
	// Bare metal is a posix user whatever files are there; its lookup
	// errors come back as they are.
	e, err = f.Open(ctx, env.Alloc{ID: "a-2", PosixUser: "u-a-2", Shape: api.ShapeBaremetal})
	if _, posix := env.AccountOf(e); err != nil || !posix {
		t.Errorf("baremetal: got %T, %v; want a posix environment", e, err)
	}
	if _, err := f.Open(ctx, env.Alloc{ID: "a-4", PosixUser: "bad/name", Shape: api.ShapeBaremetal}); !errors.Is(err, errNoAccount) {
		t.Errorf("unknown account: got %v; want the lookup's error", err)
	}
}
