package daemon

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/gpuaas/gpuaas/hostd/host"
	"github.com/gpuaas/gpuaas/hostd/tasks"
	"github.com/gpuaas/gpuaas/hostd/topology"
	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/hostproto"
)

// ignoreACPI makes the minimal guest deaf to the ACPI power button, as a
// renter who stops acpid would: the watcher script is replaced by one that
// only sleeps (busybox init respawns that one) and the running readers of
// the button's event device are killed, so nothing powers the guest off.
const ignoreACPI = `sudo sh -c 'printf "#!/bin/sh\nexec sleep 1000000\n" >/usr/lib/gpuaas/power-button
for p in $(pidof dd); do kill $p; done'
sleep 1
if pidof dd >/dev/null; then echo "still reading the power button"; exit 1; fi
echo deaf`

// TestHostdSliceVMRealGuestIgnoresACPI: a real guest (minimal image, TCG)
// that ignores the ACPI shutdown is destroyed by vm_release after the
// graceful timeout; the release says so (hard_stopped), hostd's
// vm_hard_stops_total metric counts it, and nothing of the guest is left.
// Without the destroy-after-timeout step the release would wait on a
// running guest and leave its domain.
func TestHostdSliceVMRealGuestIgnoresACPI(t *testing.T) {
	hv := realGuestHost(t)
	ctx, cancel := context.WithTimeout(t.Context(), 15*time.Minute)
	defer cancel()
	rs := startRealSliceHost(ctx, t, hv)
	img, sn, sh, log, subnet := rs.img, rs.net, rs.host, rs.log, rs.subnet

	state := rs.stateDir(t)
	env := &tasks.Env{NodeName: "node-hardstop", Hypervisor: hv, Runner: host.ExecRunner{}, Topology: topology.Real(), StateDir: state,
		ImageDir: filepath.Dir(img.Dir), Log: log, Now: time.Now, SliceNet: sn, SliceHost: sh}
	hardStops := countHardStops(env).(prometheus.Counter)
	const timeout = 10 * time.Second
	reg := tasks.New(tasks.Config{ReadinessTimeout: 5 * time.Minute, PollInterval: 250 * time.Millisecond,
		ShutdownTimeout: timeout})
	const alloc = "a-slicevm-deaf"
	ip := netip.PrefixFrom(subnet.Addr().Next().Next(), subnet.Bits())
	mac := fmt.Sprintf("52:54:00:%02x:%02x:%02x", rand.IntN(256), rand.IntN(256), rand.IntN(256))
	slot := api.Slot{ID: "sl-1", GPUPCI: "0000:17:00.0", FabricVF: "0000:18:00.1", NVMe: "/dev/disk/by-id/nvme-missing",
		NUMANode: 0, MAC: mac, IP: ip.String(), GPUUUID: realGuestGPU}
	p := hostproto.VMProvisionParams{AllocationID: alloc, UserID: "u-1", PosixUser: "renter", Slots: []api.Slot{slot},
		VCPUs: 1, MemoryMiB: 384, Image: api.VMImage{Name: filepath.Base(img.Dir), SHA256: img.Manifest.Disk.SHA256}}
	t.Cleanup(func() {
		_ = hv.Destroy(context.Background(), alloc)
		_ = hv.Undefine(context.Background(), alloc)
	})
	rep := &progress{}
	if _, err := reg[api.TaskVMProvision](ctx, env, mustJSON(t, p), rep); err != nil {
		t.Fatalf("vm_provision: %v\nprogress:\n%s", err, strings.Join(rep.lines, "\n"))
	}

	paths := tasks.PathsFor(state, alloc)
	sshCtx, sshCancel := context.WithTimeout(ctx, 2*time.Minute)
	defer sshCancel()
	out, err := exec.CommandContext(sshCtx, "ssh", "-i", paths.VMKey, "-o", "BatchMode=yes", "-o", "StrictHostKeyChecking=no",
		"-o", "UserKnownHostsFile=/dev/null", "-o", "LogLevel=ERROR", "-o", "ConnectTimeout=30",
		"renter@"+ip.Addr().String(), ignoreACPI).CombinedOutput()
	if err != nil || !strings.Contains(string(out), "deaf") {
		t.Fatalf("making the guest ignore ACPI: %v\n%s", err, out)
	}

	start := time.Now()
	rel := &progress{}
	res, err := reg[api.TaskVMRelease](ctx, env, mustJSON(t, hostproto.VMReleaseParams{AllocationID: alloc,
		Slots: []api.Slot{slot}, Wipe: true}), rel)
	if err != nil {
		t.Fatalf("vm_release: %v\nprogress:\n%s", err, strings.Join(rel.lines, "\n"))
	}
	took := time.Since(start)
	t.Logf("vm_release of a guest ignoring ACPI: %.1fs (graceful timeout %s)", took.Seconds(), timeout)
	if r := res.(tasks.VMReleaseResult); !r.HardStopped {
		t.Errorf("release result = %+v; want hard_stopped: the guest ignored the shutdown", r)
	}
	if took < timeout {
		t.Errorf("release took %s; want at least the graceful timeout %s before the destroy", took, timeout)
	}
	var m dto.Metric
	if err := hardStops.Write(&m); err != nil {
		t.Fatal(err)
	}
	if got := m.GetCounter().GetValue(); got != 1 {
		t.Errorf("vm_hard_stops_total = %v; want 1", got)
	}
	if st, err := hv.State(ctx, alloc); st != host.DomainNotFound {
		t.Errorf("after release the domain is %s (%v); want none", st, err)
	}
	if out, _ := exec.Command("virsh", "-c", "qemu:///system", "list", "--all", "--name").CombinedOutput(); strings.Contains(string(out), alloc) {
		t.Errorf("virsh list --all still lists %s:\n%s", alloc, out)
	}
}
