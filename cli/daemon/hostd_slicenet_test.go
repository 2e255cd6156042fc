package daemon

import (
	"context"
	"encoding/json"
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

	"github.com/gpuaas/gpuaas/hostd/host"
	"github.com/gpuaas/gpuaas/hostd/libvirt"
	"github.com/gpuaas/gpuaas/hostd/netiso"
	"github.com/gpuaas/gpuaas/hostd/tasks"
	"github.com/gpuaas/gpuaas/hostd/topology"
	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/hostproto"
	"github.com/gpuaas/gpuaas/internal/testutil"
)

// realGuestHost skips or fails as the guest tests do: a real libvirtd
// serving qemu:///system, root, and the tools of a slice node.
func realGuestHost(t *testing.T) *libvirt.Hypervisor {
	t.Helper()
	if testing.Short() {
		t.Skip("boots a guest through libvirtd; skipped with -short")
	}
	if os.Geteuid() != 0 {
		t.Fatal("needs root and libvirtd's qemu:///system (scripts/deps test), or go test -short")
	}
	for _, tool := range []string{"qemu-system-x86_64", "qemu-img", "genisoimage", "nft"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("%s is missing (scripts/deps test), or go test -short", tool)
		}
	}
	hv, err := libvirt.New(t.Context(), libvirt.Config{URI: "qemu:///system"})
	if err != nil {
		t.Fatalf("libvirt: %v (scripts/deps test starts libvirtd)", err)
	}
	t.Cleanup(func() { _ = hv.Close() })
	return hv
}

// freeSlotSubnet is a 10.214.N.0/23 no route on this host touches.
func freeSlotSubnet(t *testing.T) netip.Prefix {
	t.Helper()
	routes, err := exec.Command("ip", "-4", "route").CombinedOutput()
	if err != nil {
		t.Fatalf("ip -4 route: %v\n%s", err, routes)
	}
	for range 50 {
		n := 2 * rand.IntN(127)
		if !strings.Contains(string(routes), fmt.Sprintf("10.214.%d.", n)) &&
			!strings.Contains(string(routes), fmt.Sprintf("10.214.%d.", n+1)) {
			return netip.MustParsePrefix(fmt.Sprintf("10.214.%d.0/23", n))
		}
	}
	t.Fatal("no free 10.214.N.0/23")
	return netip.Prefix{}
}

type progress struct{ lines []string }

func (p *progress) Progress(phase, status string, _ time.Duration, msg string) {
	p.lines = append(p.lines, phase+" "+status+" "+msg)
}

// TestHostdSliceVMRealGuest is the daemon's slice path on a real libvirtd
// with the minimal guest image: hostd's start-up makes its isolated network
// and nft table (sliceFlags.sliceHost), vm_provision runs whole on a node
// declaring no passthrough devices (the VFIO check skipped with the
// reason, no hostdev), the guest reaches its ready marker, and vm_release
// leaves no domain, overlay, seed, VM key, lease or nft element.
func TestHostdSliceVMRealGuest(t *testing.T) {
	hv := realGuestHost(t)
	ctx, cancel := context.WithTimeout(t.Context(), 15*time.Minute)
	defer cancel()
	rs := startRealSliceHost(ctx, t, hv)
	img, sn, sh, log, subnet, table := rs.img, rs.net, rs.host, rs.log, rs.subnet, rs.table
	if !sh.Emulate || sh.NoPassthrough == "" {
		t.Fatalf("slice host %+v: want emulated, no passthrough", sh)
	}

	state := rs.stateDir(t)
	env := &tasks.Env{NodeName: "node-blocked", Hypervisor: hv, Runner: host.ExecRunner{}, Topology: topology.Real(), StateDir: state,
		ImageDir: filepath.Dir(img.Dir), Log: log, Now: time.Now, SliceNet: sn, SliceHost: sh}
	reg := tasks.New(tasks.Config{ReadinessTimeout: 5 * time.Minute, PollInterval: 250 * time.Millisecond,
		ShutdownTimeout: 30 * time.Second})
	const alloc = "a-slicevm-real"
	ip := netip.PrefixFrom(subnet.Addr().Next().Next(), subnet.Bits()) // a slot's address on the network
	mac := fmt.Sprintf("52:54:00:%02x:%02x:%02x", rand.IntN(256), rand.IntN(256), rand.IntN(256))
	// GPU, VF and namespace this machine lacks: a node without passthrough.
	slot := api.Slot{ID: "sl-1", GPUPCI: "0000:17:00.0", FabricVF: "0000:18:00.1", NVMe: "/dev/disk/by-id/nvme-missing",
		NUMANode: 0, MAC: mac, IP: ip.String(), GPUUUID: realGuestGPU}
	p := hostproto.VMProvisionParams{AllocationID: alloc, UserID: "u-1", PosixUser: "renter", Slots: []api.Slot{slot},
		VCPUs: 1, MemoryMiB: 384, Image: api.VMImage{Name: filepath.Base(img.Dir), SHA256: img.Manifest.Disk.SHA256}}
	t.Cleanup(func() {
		_ = hv.Destroy(context.Background(), alloc)
		_ = hv.Undefine(context.Background(), alloc)
	})

	rep := &progress{}
	start := time.Now()
	res, err := reg[api.TaskVMProvision](ctx, env, mustJSON(t, p), rep)
	if err != nil {
		t.Fatalf("vm_provision: %v\nprogress:\n%s", err, strings.Join(rep.lines, "\n"))
	}
	t.Logf("vm_provision → ready (marker read) in %.1fs under TCG", time.Since(start).Seconds())
	if r := res.(hostproto.VMProvisionResult); r.Address != ip.Addr().String()+":22" {
		t.Errorf("address = %q; want the slot's", r.Address)
	}
	checkRealGuestDriver(t, res.(hostproto.VMProvisionResult).DriverCheck) // hostd_drivercheck_test.go
	if !slices.Contains(rep.lines, tasks.PhaseVFIOCheck+" "+api.PhaseDone+" skipped: "+sh.NoPassthrough) {
		t.Errorf("the VFIO check's skip and reason are not recorded:\n%s", strings.Join(rep.lines, "\n"))
	}
	desc, err := exec.Command("virsh", "-c", "qemu:///system", "dumpxml", alloc).CombinedOutput()
	if err != nil {
		t.Fatalf("virsh dumpxml: %v\n%s", err, desc)
	}
	if strings.Contains(string(desc), "<hostdev") || strings.Contains(string(desc), "nvme-missing") {
		t.Errorf("a node without passthrough handed a device to the guest:\n%s", desc)
	}
	fw, err := netiso.New(netiso.Config{Table: table})
	if err != nil {
		t.Fatal(err)
	}
	ports, err := fw.Ports(ctx)
	if err != nil || len(ports) != 1 || !strings.EqualFold(ports[0].MAC, mac) || ports[0].IP != ip.Addr() {
		t.Fatalf("nft entries = %+v, %v; want the slot's port", ports, err)
	}

	// Wipe as controld asks: the namespace was never handed out, so
	// nothing is wiped (blkdiscard of a missing device would fail).
	rel := &progress{}
	res, err = reg[api.TaskVMRelease](ctx, env, mustJSON(t, hostproto.VMReleaseParams{AllocationID: alloc,
		Slots: []api.Slot{slot}, Wipe: true}), rel)
	if err != nil {
		t.Fatalf("vm_release: %v\nprogress:\n%s", err, strings.Join(rel.lines, "\n"))
	}
	if r := res.(tasks.VMReleaseResult); len(r.NotVFIOBound) > 0 || len(r.Wiped) > 0 {
		t.Errorf("release of a guest without passthrough = %+v; want no device rebound or wiped", r)
	}
	if st, err := hv.State(ctx, alloc); st != host.DomainNotFound {
		t.Errorf("after release the domain is %s (%v); want none", st, err)
	}
	if out, _ := exec.Command("virsh", "-c", "qemu:///system", "list", "--all", "--name").CombinedOutput(); strings.Contains(string(out), alloc) {
		t.Errorf("virsh list --all still lists %s:\n%s", alloc, out)
	}
	paths := tasks.PathsFor(state, alloc)
	for what, path := range map[string]string{"overlay": paths.Overlay, "seed": paths.SeedDir, "lease": paths.Lease,
		"vm key": paths.VMKey} {
		if _, err := os.Stat(path); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("after release the %s %s is left (%v)", what, path, err)
		}
	}
	if ports, err := fw.Ports(ctx); err != nil || len(ports) != 0 {
		t.Errorf("after release nft entries = %+v, %v; want none", ports, err)
	}
}

func mustJSON(t *testing.T, v any) json.RawMessage {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestHostdSliceHostBlockers: what hostd cannot set up at start is a
// blocker naming what the node lacks, slice topology discovery reports
// it, and vm_provision refuses (fail closed) with the reason and leaves
// nothing. Real libvirtd: a network of the slice network's name that is
// not isolated (no <port isolated='yes'/>) is refused; nft missing from PATH is named.
func TestHostdSliceHostBlockers(t *testing.T) {
	hv := realGuestHost(t)
	ctx := t.Context()
	suffix := fmt.Sprintf("%06x", rand.IntN(1<<24))
	subnet := freeSlotSubnet(t)
	name := "gpuaas-test-" + suffix
	gw := subnet.Addr().Next()
	shared := fmt.Sprintf(`<network><name>%s</name><bridge name='gpt-%s'/><dns enable='no'/><ip address='%s' prefix='%d'/></network>`,
		name, suffix, gw, subnet.Bits())
	xmlFile := filepath.Join(t.TempDir(), "net.xml")
	if err := os.WriteFile(xmlFile, []byte(shared), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = hv.RemoveNetwork(context.Background(), name) })
	if out, err := exec.Command("virsh", "-c", "qemu:///system", "net-define", xmlFile).CombinedOutput(); err != nil {
		t.Fatalf("virsh net-define: %v\n%s", err, out)
	}
	t.Setenv("PATH", t.TempDir()) // no nft
	flags := sliceFlags{Network: name, Bridge: "gpt-" + suffix, Subnet: subnet.String(), Passthrough: true,
		table: "gpuaas_test_" + suffix}
	sn, sh := flags.sliceHost(ctx, hv, testutil.Logger(t))
	if sn != nil {
		t.Fatalf("slice net set up on a shared network: %+v", sn)
	}
	var codes []string
	for _, b := range sh.Blockers {
		codes = append(codes, string(b.Code)+" "+b.Device+": "+b.Message)
	}
	got := strings.Join(codes, "\n")
	for _, want := range []string{"command_missing nft: nft is not on PATH", "slice_network " + name + ": libvirt network " + name,
		"its ports are not isolated"} {
		if !strings.Contains(got, want) {
			t.Errorf("blockers:\n%s\nwant one with %q", got, want)
		}
	}

	state := t.TempDir()
	env := &tasks.Env{NodeName: "node-blocked", Hypervisor: hv, Runner: host.ExecRunner{}, Topology: topology.Real(),
		StateDir: state, ImageDir: t.TempDir(), Log: testutil.Logger(t), Now: time.Now, SliceHost: sh}
	reg := tasks.New(tasks.Config{})
	res, err := reg[api.TaskTopologyDiscover](ctx, env, mustJSON(t, hostproto.TopologyDiscoverParams{Shape: api.ShapeGPUSlice}), &progress{})
	if err != nil {
		t.Fatal(err)
	}
	var found int
	for _, b := range res.(api.TopologyResult).Blockers {
		if slices.ContainsFunc(sh.Blockers, func(s api.Blocker) bool { return s == b }) {
			found++
		}
	}
	if found != len(sh.Blockers) {
		t.Errorf("topology blockers = %+v; want hostd's %+v among them", res.(api.TopologyResult).Blockers, sh.Blockers)
	}
	p := hostproto.VMProvisionParams{AllocationID: "a-blocked", PosixUser: "renter", VCPUs: 1, MemoryMiB: 384,
		Slots: []api.Slot{{GPUPCI: "0000:17:00.0", MAC: "52:54:00:00:00:01", IP: netip.PrefixFrom(gw.Next(), subnet.Bits()).String()}},
		Image: api.VMImage{Name: "minimal", SHA256: strings.Repeat("0", 64)}}
	_, err = reg[api.TaskVMProvision](ctx, env, mustJSON(t, p), &progress{})
	if !errors.Is(err, tasks.ErrSliceHostBlocked) || !strings.Contains(err.Error(), "its ports are not isolated") {
		t.Errorf("vm_provision on a blocked node = %v; want ErrSliceHostBlocked with the reason", err)
	}
	if entries, _ := os.ReadDir(state); len(entries) != 0 {
		t.Errorf("a refused vm_provision left %v in the state dir", entries)
	}
}
