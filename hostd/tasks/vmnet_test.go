package tasks_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gpuaas/gpuaas/hostd/netiso"
	"github.com/gpuaas/gpuaas/hostd/sim"
	"github.com/gpuaas/gpuaas/hostd/tasks"
	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/hostproto"
)

// TestVMProvisionPinsSlicePort: with a SliceNet, a slice VM joins hostd's
// network instead of "default", its tap (found by libvirt's 0xfe MAC in
// a sysfs tree) gets one entry in a real nftables table with the slot's
// MAC and IP, and a release, or a provisioning that fails after the
// domain started, removes it.
func TestVMProvisionPinsSlicePort(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Fatal("this test changes the host's nftables ruleset and needs root")
	}
	if _, err := exec.LookPath("nft"); err != nil {
		t.Fatal("nft is not installed: apt-get install -y nftables (or scripts/deps test)")
	}
	b := make([]byte, 4)
	rand.Read(b)
	fw, err := netiso.New(netiso.Config{Table: "gpuaas_test_" + hex.EncodeToString(b)})
	if err != nil {
		t.Fatal(err)
	}
	if err := fw.Install(t.Context()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = fw.Remove(context.Background()) })

	h, env := simHost(t, sim.H200Slice8())
	s := slots(t, env)
	sys := t.TempDir()
	tap := "vnet7"
	if err := os.MkdirAll(filepath.Join(sys, tap), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(sys, tap, "address"), []byte("fe"+strings.ToLower(s[0].MAC)[2:]+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	env.SliceNet = &tasks.SliceNet{Network: "gpuaas-slices", Ports: fw, SysClassNet: sys}

	const alloc = "a-pin00000001"
	if _, _, err := run(t, env, api.TaskVMProvision, provisionParams(h, alloc, s[:2])); err != nil {
		t.Fatal(err)
	}
	spec, err := h.Hypervisor.Spec(alloc)
	if err != nil {
		t.Fatal(err)
	}
	if spec.Network != "gpuaas-slices" {
		t.Errorf("domain network = %q; want the slice network gpuaas-slices", spec.Network)
	}
	ip, _, _ := strings.Cut(s[0].IP, "/")
	want := netiso.Port{Dev: tap, MAC: strings.ToLower(s[0].MAC), IP: netip.MustParseAddr(ip)}
	if got, err := fw.Ports(t.Context()); err != nil || len(got) != 1 || got[0] != want {
		t.Fatalf("nft entries after provisioning = %v, %v; want [%v]", got, err, want)
	}
	if _, _, err := run(t, env, api.TaskVMRelease, hostproto.VMReleaseParams{AllocationID: alloc, Slots: s[:2]}); err != nil {
		t.Fatal(err)
	}
	if got, err := fw.Ports(t.Context()); err != nil || len(got) != 0 {
		t.Errorf("nft entries after release = %v, %v; want none", got, err)
	}
	if got, err := fw.PortNames(t.Context()); err != nil || len(got) != 0 {
		t.Errorf("nft ports after release = %v, %v; want none", got, err)
	}

	// A provisioning that fails after define_start pinned the port.
	h.Faults.Fail(tasks.PhaseReadiness, "")
	_, _, err = run(t, env, api.TaskVMProvision, provisionParams(h, alloc, s[:2]))
	if !errors.Is(err, tasks.ErrInjected) {
		t.Fatalf("provision with a readiness fault = %v; want ErrInjected", err)
	}
	if got, err := fw.Ports(t.Context()); err != nil || len(got) != 0 {
		t.Errorf("nft entries after a failed provisioning = %v, %v; want none", got, err)
	}
	if got := leftovers(t, h, alloc); len(got) != 0 {
		t.Errorf("left after a failed provisioning: %v", got)
	}

	// A tap that cannot be found fails define_start and leaves nothing.
	if err := os.RemoveAll(filepath.Join(sys, tap)); err != nil {
		t.Fatal(err)
	}
	_, _, err = run(t, env, api.TaskVMProvision, provisionParams(h, alloc, s[:2]))
	var pe *tasks.PhaseError
	if !errors.As(err, &pe) || pe.Phase != tasks.PhaseDefineStart || !strings.Contains(err.Error(), "no interface with MAC fe") {
		t.Errorf("provision without the tap = %v; want a define_start failure naming the tap's MAC", err)
	}
	if got := leftovers(t, h, alloc); len(got) != 0 {
		t.Errorf("left after a failed pin: %v", got)
	}
}
