package tasks

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"os"
	"os/exec"
	"slices"
	"testing"
	"time"

	"github.com/gpuaas/gpuaas/hostd/host"
	"github.com/gpuaas/gpuaas/hostd/libvirt"
	"github.com/gpuaas/gpuaas/hostd/netiso"
)

// TestClearNetworkGuests (real libvirtd's test driver, real nft): the
// domains with a NIC on the named network — running or only defined —
// are destroyed and undefined and their MACs' nft entries removed; a
// domain on another network, or on none, and its entry are left alone.
func TestClearNetworkGuests(t *testing.T) {
	if testing.Short() {
		t.Skip("needs libvirtd and nft; skipped with -short")
	}
	if _, err := os.Stat(libvirt.DefaultSocket); err != nil {
		t.Fatalf("libvirtd is not running (scripts/deps test): %v", err)
	}
	if _, err := exec.LookPath("nft"); err != nil || os.Geteuid() != 0 {
		t.Fatalf("needs root and nft (scripts/deps test): %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	hv, err := libvirt.New(ctx, libvirt.Config{URI: "test:///default"})
	if err != nil {
		t.Fatal(err)
	}
	defer hv.Close()
	fw, err := netiso.New(netiso.Config{Table: fmt.Sprintf("gpuaas_test_stale_%06x", rand.IntN(1<<24))})
	if err != nil {
		t.Fatal(err)
	}
	if err := fw.Install(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = fw.Remove(context.Background()) })

	suffix := fmt.Sprintf("%06x", rand.IntN(1<<24))
	network := "gpuaas-test-stale-" + suffix
	type dom struct {
		name, network, mac string
		running, cleared   bool
	}
	doms := []dom{
		{"a-left-running-" + suffix, network, "52:54:00:aa:00:01", true, true},
		{"a-left-defined-" + suffix, network, "52:54:00:aa:00:02", false, true},
		{"a-other-net-" + suffix, "gpuaas-test-other-" + suffix, "52:54:00:aa:00:03", true, false},
		{"a-no-nic-" + suffix, "", "", true, false},
	}
	for i, d := range doms {
		spec := host.DomainSpec{Name: d.name, VCPUs: 1, MemoryMiB: 64, NUMANode: -1, Network: d.network, MAC: d.mac}
		if err := hv.Define(ctx, spec); err != nil {
			t.Fatalf("define %s: %v", d.name, err)
		}
		t.Cleanup(func() { _ = hv.Destroy(context.Background(), d.name); _ = hv.Undefine(context.Background(), d.name) })
		if d.running {
			if err := hv.Start(ctx, d.name); err != nil {
				t.Fatalf("start %s: %v", d.name, err)
			}
		}
		if d.mac != "" {
			p := netiso.Port{Dev: fmt.Sprintf("vnet%d", 900+i), MAC: d.mac, IP: netip.MustParseAddr(fmt.Sprintf("10.77.0.%d", 2+i))}
			if err := fw.AddPort(ctx, p); err != nil {
				t.Fatal(err)
			}
		}
	}

	cleared, err := ClearNetworkGuests(ctx, hv, network, fw)
	if err != nil {
		t.Fatal(err)
	}
	names, err := hv.List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	ports, err := fw.Ports(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range doms {
		if got := slices.Contains(cleared, d.name); got != d.cleared {
			t.Errorf("%s (network %q) cleared = %v; want %v", d.name, d.network, got, d.cleared)
		}
		if listed := slices.Contains(names, d.name); listed == d.cleared {
			t.Errorf("%s still defined = %v after the clear; want %v", d.name, listed, !d.cleared)
		}
		if d.mac == "" {
			continue
		}
		entry := slices.ContainsFunc(ports, func(p netiso.Port) bool { return p.MAC == d.mac })
		if entry == d.cleared {
			t.Errorf("%s's nft entry present = %v; want %v", d.name, entry, !d.cleared)
		}
	}
	if again, err := ClearNetworkGuests(ctx, hv, network, fw); err != nil || len(again) != 0 {
		t.Errorf("a second clear = %v, %v; want nothing to do", again, err)
	}
	if _, err := ClearNetworkGuests(ctx, hv, "", fw); err == nil {
		t.Error("a clear with no network named was accepted")
	}
}
