package tasks_test

import (
	"context"
	"errors"
	"os"
	"testing"
	"time"

	hostenv "github.com/gpuaas/gpuaas/hostd/env"
	"github.com/gpuaas/gpuaas/hostd/sim"
	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/hostproto"
)

// TestVMReleaseForgetsPinnedHostKey: the host key the terminal pinned on
// its first hop into the VM goes with the VM's release; it used to stay
// under terminal/vm_host_keys for every slice allocation ever served.
func TestVMReleaseForgetsPinnedHostKey(t *testing.T) {
	t.Parallel()
	h, env := simHost(t, sim.H200Slice8())
	s := slots(t, env)
	const alloc = "a-pin"
	if _, _, err := run(t, env, api.TaskVMProvision, provisionParams(h, alloc, s[:1])); err != nil {
		t.Fatal(err)
	}
	f, err := hostenv.NewFactory(hostenv.Config{StateDir: env.StateDir, Accounts: h.Users.Accounts(), Hypervisor: h.Hypervisor})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cc, _, _, err := f.VM(alloc, api.PosixUser(alloc)).(hostenv.Hopper).Hop(ctx)
	if err != nil {
		t.Fatal(err)
	}
	_ = cc.Close()
	pin := hostenv.PinPath(env.StateDir, alloc)
	if _, err := os.Stat(pin); err != nil {
		t.Fatalf("no pinned host key after a hop: %v", err)
	}
	if _, _, err := run(t, env, api.TaskVMRelease, hostproto.VMReleaseParams{AllocationID: alloc, Slots: s[:1]}); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(pin); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("pinned host key after release: %v; want gone", err)
	}
}
