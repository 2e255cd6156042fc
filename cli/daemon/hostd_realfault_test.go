package daemon

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gpuaas/gpuaas/hostd/host"
	"github.com/gpuaas/gpuaas/hostd/netiso"
	"github.com/gpuaas/gpuaas/hostd/tasks"
	"github.com/gpuaas/gpuaas/hostd/topology"
	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/hostproto"
)

// TestHostdSliceVMRealGuestFailureLeavesNothing: on a real libvirtd with
// the minimal image, vm_provision failing at each of its phases (the
// fault hooks, failing a phase before it runs, so every earlier phase's
// work is done — up to a running guest when readiness fails) leaves no
// domain, overlay, seed, VM key, lease or nft element, and the next
// provisioning of the same allocation succeeds.
func TestHostdSliceVMRealGuestFailureLeavesNothing(t *testing.T) {
	hv := realGuestHost(t)
	ctx := t.Context()
	rs := startRealSliceHost(ctx, t, hv)
	state := rs.stateDir(t)
	faults := &tasks.Faults{}
	env := &tasks.Env{NodeName: "node-faults", Hypervisor: hv, Runner: host.ExecRunner{}, Topology: topology.Real(), StateDir: state,
		ImageDir: filepath.Dir(rs.img.Dir), Log: rs.log, Now: time.Now, SliceNet: rs.net, SliceHost: rs.host, Faults: faults}
	reg := tasks.New(tasks.Config{ReadinessTimeout: 5 * time.Minute, PollInterval: 250 * time.Millisecond, ShutdownTimeout: 10 * time.Second})
	const alloc = "a-slicevm-fault"
	ip := netip.PrefixFrom(rs.subnet.Addr().Next().Next(), rs.subnet.Bits())
	mac := fmt.Sprintf("52:54:00:%02x:%02x:%02x", rand.IntN(256), rand.IntN(256), rand.IntN(256))
	slot := api.Slot{ID: "sl-1", GPUPCI: "0000:17:00.0", FabricVF: "0000:18:00.1", NVMe: "/dev/disk/by-id/nvme-missing",
		NUMANode: 0, MAC: mac, IP: ip.String(), GPUUUID: realGuestGPU}
	p := hostproto.VMProvisionParams{AllocationID: alloc, UserID: "u-1", PosixUser: "renter", Slots: []api.Slot{slot},
		VCPUs: 1, MemoryMiB: 384, Image: api.VMImage{Name: filepath.Base(rs.img.Dir), SHA256: rs.img.Manifest.Disk.SHA256}}
	t.Cleanup(func() {
		_ = hv.Destroy(t.Context(), alloc)
		_ = hv.Undefine(t.Context(), alloc)
	})
	fw, err := netiso.New(netiso.Config{Table: rs.table})
	if err != nil {
		t.Fatal(err)
	}
	paths := tasks.PathsFor(state, alloc)
	left := func() []string {
		var out []string
		if st, err := hv.State(ctx, alloc); st != host.DomainNotFound {
			out = append(out, fmt.Sprintf("domain (%s, %v)", st, err))
		}
		for what, path := range map[string]string{"overlay": paths.Overlay, "seed": paths.SeedDir, "lease": paths.Lease, "vm key": paths.VMKey} {
			if _, err := os.Stat(path); !errors.Is(err, os.ErrNotExist) {
				out = append(out, what)
			}
		}
		if ports, err := fw.Ports(ctx); err != nil || len(ports) != 0 {
			out = append(out, fmt.Sprintf("nft %v %v", ports, err))
		}
		return out
	}
	for _, phase := range tasks.ProvisionPhases {
		if phase == tasks.PhaseVFIOCheck && rs.host.NoPassthrough != "" {
			continue // skipped with its reason on a node without passthrough: no hook runs (TestHostdSliceVMRealGuest)
		}
		faults.Clear()
		faults.Fail(phase, "")
		start := time.Now()
		_, err := reg[api.TaskVMProvision](ctx, env, mustJSON(t, p), &progress{})
		var pe *tasks.PhaseError
		if !errors.Is(err, tasks.ErrInjected) || !errors.As(err, &pe) || pe.Phase != phase {
			t.Errorf("fault in %s: vm_provision = %v; want the injected failure in that phase", phase, err)
		}
		if got := left(); len(got) > 0 {
			t.Errorf("fault in %s: left %v", phase, got)
		}
		if out, _ := exec.Command("virsh", "-c", "qemu:///system", "list", "--all", "--name").CombinedOutput(); strings.Contains(string(out), alloc) {
			t.Errorf("fault in %s: virsh list --all lists %s", phase, alloc)
		}
		t.Logf("fault in %s: failed and cleaned up in %.1fs", phase, time.Since(start).Seconds())
	}
	faults.Clear()
	if _, err := reg[api.TaskVMProvision](ctx, env, mustJSON(t, p), &progress{}); err != nil {
		t.Fatalf("provisioning after the failures: %v", err)
	}
	if _, err := reg[api.TaskVMRelease](ctx, env, mustJSON(t, hostproto.VMReleaseParams{AllocationID: alloc, Slots: []api.Slot{slot}, Wipe: true}), &progress{}); err != nil {
		t.Fatalf("release: %v", err)
	}
	if got := left(); len(got) > 0 {
		t.Errorf("after release: left %v", got)
	}
}
