package devenv

import (
	"context"
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

	"github.com/gpuaas/gpuaas/hostd/libvirt"
	"github.com/gpuaas/gpuaas/hostd/netiso"
	"github.com/gpuaas/gpuaas/internal/testutil"
)

// TestDevVMClearsLeftGuests: a `gpuaas dev --vm` that ends without
// releasing its slices (crashed, or killed by a failed test) leaves a
// running guest on dev's slice network and its entry in dev's nft table;
// the next dev --vm start removes both, and leaves a domain that is not
// on its network alone. Dev's stop clears a guest it still has too.
func TestDevVMClearsLeftGuests(t *testing.T) {
	if testing.Short() {
		t.Skip("real libvirtd and guests; skipped with -short")
	}
	if os.Geteuid() != 0 {
		t.Fatal("needs root (libvirtd's qemu:///system, nft), or go test -short")
	}
	for _, tool := range []string{"virsh", "qemu-system-x86_64", "nft"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("%s is missing (scripts/deps test): %v", tool, err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	cfg := Config{VM: VMImageMinimal, DataDir: t.TempDir(), Log: testutil.Logger(t)}
	start := func() *vmHost {
		t.Helper()
		var v *vmHost
		var err error
		// CI's e2e may hold the machine's dev --vm lock for a while.
		testutil.EventuallyWithin(t, 15*time.Minute, "the machine's dev --vm lock", func() bool {
			v, err = startVMHost(ctx, cfg)
			return err == nil || !strings.Contains(err.Error(), "another gpuaas dev --vm runs")
		})
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	suffix := fmt.Sprintf("%06x", rand.IntN(1<<24))
	virsh := func(args ...string) string {
		t.Helper()
		out, err := exec.Command("virsh", append([]string{"-c", libvirt.DefaultURI}, args...)...).CombinedOutput()
		if err != nil {
			t.Fatalf("virsh %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return string(out)
	}
	define := func(name, devices string) {
		t.Helper()
		xml := fmt.Sprintf(`<domain type='qemu'><name>%s</name><memory unit='MiB'>32</memory><vcpu>1</vcpu>
<os><type arch='x86_64' machine='q35'>hvm</type></os><devices>%s</devices></domain>`, name, devices)
		p := filepath.Join(t.TempDir(), name+".xml")
		if err := os.WriteFile(p, []byte(xml), 0o644); err != nil {
			t.Fatal(err)
		}
		virsh("define", p)
		t.Cleanup(func() {
			_ = exec.Command("virsh", "-c", libvirt.DefaultURI, "destroy", name).Run()
			_ = exec.Command("virsh", "-c", libvirt.DefaultURI, "undefine", name).Run()
		})
	}
	fw, err := netiso.New(netiso.Config{Table: devSliceTable})
	if err != nil {
		t.Fatal(err)
	}
	// leave starts a guest on dev's network with its slot's entry in
	// dev's table, as hostd's vm_provision does.
	leave := func(v *vmHost, name, mac string) {
		t.Helper()
		define(name, fmt.Sprintf(`<interface type='network'><source network='%s'/><mac address='%s'/><model type='virtio'/><rom enabled='no'/></interface>`,
			devSliceNetwork, mac))
		virsh("start", name)
		dev, err := v.hv.InterfaceDevice(ctx, name, mac)
		if err != nil {
			t.Fatal(err)
		}
		if err := fw.AddPort(ctx, netiso.Port{Dev: dev, MAC: mac, IP: netip.MustParseAddr("10.77.0.2")}); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = fw.RemoveMAC(context.Background(), mac) })
	}
	domains := func() []string {
		t.Helper()
		return strings.Fields(virsh("list", "--all", "--name"))
	}
	entries := func() int {
		t.Helper()
		ports, err := fw.Ports(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return len(ports)
	}

	first := start()
	stale, bystander := "a-stale"+suffix, "gpuaas-test-bystander-"+suffix
	leave(first, stale, "52:54:00:77:00:02")
	define(bystander, "") // defined, on no network: not dev's
	// The first dev "crashes": its lock and connection end, nothing is
	// released.
	first.log = nil
	if err := first.close(); err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(domains(), stale) || entries() != 1 {
		t.Fatalf("the crashed dev's guest or entry is not there: domains %v, %d entries", domains(), entries())
	}

	second := start()
	if got := domains(); slices.Contains(got, stale) {
		t.Errorf("the next dev --vm start left the crashed dev's guest %s: %v", stale, got)
	}
	if n := entries(); n != 0 {
		t.Errorf("the next dev --vm start left %d entries in %s", n, devSliceTable)
	}
	if !slices.Contains(domains(), bystander) {
		t.Errorf("dev's start removed %s, which is not on its network", bystander)
	}

	// A guest dev still has when it stops goes with it.
	stale2 := "a-stale2" + suffix
	leave(second, stale2, "52:54:00:77:00:03")
	if err := second.close(); err != nil {
		t.Fatal(err)
	}
	if got := domains(); slices.Contains(got, stale2) {
		t.Errorf("dev's stop left its guest %s: %v", stale2, got)
	}
	if n := entries(); n != 0 {
		t.Errorf("dev's stop left %d entries in %s", n, devSliceTable)
	}
	if !slices.Contains(domains(), bystander) {
		t.Errorf("dev's stop removed %s, which is not on its network", bystander)
	}
}
