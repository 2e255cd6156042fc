package daemon

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gpuaas/gpuaas/controld/alloc"
	"github.com/gpuaas/gpuaas/controld/node"
	"github.com/gpuaas/gpuaas/hostd/host"
	"github.com/gpuaas/gpuaas/hostd/netiso"
	"github.com/gpuaas/gpuaas/hostd/tasks"
	"github.com/gpuaas/gpuaas/hostd/topology"
	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/hostproto"
)

// realGuestGPU is the GPU UUID TestHostdSliceVMRealGuest's slot carries:
// on a node without passthrough hostd seeds it, and the test image's
// simulated nvidia-smi lists it as simulated.
const realGuestGPU = "GPU-5eed0000-1111-2222-3333-444455556666"

// checkRealGuestDriver: the real guest's driver check (its /init ran the
// simulated nvidia-smi -L) reported the seeded GPU, marked simulated, and
// controld's comparison takes it from a test node only, and only for that
// slot's GPU.
func checkRealGuestDriver(t *testing.T, c *api.DriverCheck) {
	t.Helper()
	want := api.SimGPUUUID(realGuestGPU)
	if c == nil || !c.Passed || !slices.Equal(c.UUIDs, []string{want}) {
		t.Fatalf("driver check = %+v; want passed with [%s]", c, want)
	}
	if ok, why := alloc.CheckDriver(c, node.DriverInventory{UUIDs: []string{realGuestGPU}, TestNode: true}); !ok {
		t.Errorf("on a test node the check failed: %s", why)
	}
	if ok, why := alloc.CheckDriver(c, node.DriverInventory{UUIDs: []string{realGuestGPU}}); ok || !strings.Contains(why, "not a test node") {
		t.Errorf("on a node that is not a test node: passed %v (%s); want refused", ok, why)
	}
	other := "GPU-0ther000-1111-2222-3333-444455556666"
	if ok, why := alloc.CheckDriver(c, node.DriverInventory{UUIDs: []string{other}, TestNode: true}); ok || !strings.Contains(why, "mismatch") {
		t.Errorf("against another slot's GPU: passed %v (%s); want a mismatch", ok, why)
	}
}

// TestHostdSliceVMRealGuestNoGPUs: a real guest (test image, TCG) whose
// seed lists no GPU UUID (the slot's is unknown to the inventory) has a
// simulated nvidia-smi that finds no devices: the guest's driver check
// writes the failed marker, vm_provision fails at readiness at once (not
// at its deadline) with the guest's reason, and leaves no domain, overlay,
// seed, lease or nft entry.
func TestHostdSliceVMRealGuestNoGPUs(t *testing.T) {
	hv := realGuestHost(t)
	ctx, cancel := context.WithTimeout(t.Context(), 15*time.Minute)
	defer cancel()
	rs := startRealSliceHost(ctx, t, hv)
	img, sn, sh, log, subnet, table := rs.img, rs.net, rs.host, rs.log, rs.subnet, rs.table
	state := rs.stateDir(t)
	env := &tasks.Env{NodeName: "node-nogpu", Hypervisor: hv, Runner: host.ExecRunner{}, Topology: topology.Real(), StateDir: state,
		ImageDir: filepath.Dir(img.Dir), Log: log, Now: time.Now, SliceNet: sn, SliceHost: sh}
	const readiness = 5 * time.Minute
	reg := tasks.New(tasks.Config{ReadinessTimeout: readiness, PollInterval: 250 * time.Millisecond,
		ShutdownTimeout: 30 * time.Second})
	const id = "a-slicevm-nogpu"
	ip := netip.PrefixFrom(subnet.Addr().Next().Next(), subnet.Bits())
	mac := fmt.Sprintf("52:54:00:%02x:%02x:%02x", rand.IntN(256), rand.IntN(256), rand.IntN(256))
	slot := api.Slot{ID: "sl-1", GPUPCI: "0000:17:00.0", NUMANode: 0, MAC: mac, IP: ip.String()} // no GPU UUID
	p := hostproto.VMProvisionParams{AllocationID: id, UserID: "u-1", PosixUser: "renter", Slots: []api.Slot{slot},
		VCPUs: 1, MemoryMiB: 384, Image: api.VMImage{Name: filepath.Base(img.Dir), SHA256: img.Manifest.Disk.SHA256}}
	t.Cleanup(func() {
		_ = hv.Destroy(context.Background(), id)
		_ = hv.Undefine(context.Background(), id)
	})
	rep := &progress{}
	start := time.Now()
	_, err := reg[api.TaskVMProvision](ctx, env, mustJSON(t, p), rep)
	took := time.Since(start)
	var pe *tasks.PhaseError
	if !errors.Is(err, tasks.ErrDriverCheck) || !errors.As(err, &pe) || pe.Phase != tasks.PhaseReadiness {
		t.Fatalf("vm_provision = %v; want the readiness phase's driver check failure\nprogress:\n%s", err, strings.Join(rep.lines, "\n"))
	}
	if !strings.Contains(err.Error(), "No devices were found") {
		t.Errorf("reason %q; want the guest's nvidia-smi's words", err)
	}
	if took >= readiness {
		t.Errorf("failed after %s: at the deadline, not at the failed marker", took)
	}
	t.Logf("vm_provision → driver check failed in %.1fs under TCG: %v", took.Seconds(), err)
	if st, err := hv.State(ctx, id); st != host.DomainNotFound {
		t.Errorf("after the failure the domain is %s (%v); want none", st, err)
	}
	if out, _ := exec.Command("virsh", "-c", "qemu:///system", "list", "--all", "--name").CombinedOutput(); strings.Contains(string(out), id) {
		t.Errorf("virsh list --all still lists %s:\n%s", id, out)
	}
	paths := tasks.PathsFor(state, id)
	for what, path := range map[string]string{"overlay": paths.Overlay, "seed": paths.SeedDir, "lease": paths.Lease, "vm key": paths.VMKey} {
		if _, err := os.Stat(path); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("after the failure the %s %s is left (%v)", what, path, err)
		}
	}
	fw, err := netiso.New(netiso.Config{Table: table})
	if err != nil {
		t.Fatal(err)
	}
	if ports, err := fw.Ports(ctx); err != nil || len(ports) != 0 {
		t.Errorf("after the failure nft entries = %+v, %v; want none", ports, err)
	}
}
