package guestimage_test

import (
	"context"
	"fmt"
	"net/netip"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/gpuaas/gpuaas/hostd/libvirt"
	"github.com/gpuaas/gpuaas/hostd/netiso"
)

// This file checks slice network isolation with two minimal guests on
// one isolated libvirt network (hostd/libvirt's NetworkSpec) under the
// nftables table of hostd/netiso: guest A reaches guest B by neither
// ping, arping nor TCP while both reach the host; each layer alone is
// enough; with both switched off the same probes succeed (so the probes
// can tell); a spoofed source address from A is dropped by the nft layer.

// probe runs the reachability probes from guest a: to b by ping, arping
// (raw ARP, needs root: sudo) and TCP to its sshd, and to the gateway by
// ping. It returns "ok" or "fail" by probe name.
func probe(t *testing.T, ctx context.Context, a *testGuest, bIP, gw string) map[string]string {
	t.Helper()
	script := fmt.Sprintf(`r() { if sh -c "$2" >/dev/null 2>&1; then echo "$1=ok"; else echo "$1=fail"; fi; }
r ping "ping -c 1 -W 2 %[1]s"
r arping "sudo arping -c 1 -w 2 -I mgmt0 %[1]s"
r tcp "sleep 2 | nc -w 3 %[1]s 22 | head -c 4 | grep -q SSH-"
r gateway "ping -c 1 -W 2 %[2]s"
`, bIP, gw)
	out, err := a.ssh(ctx, script)
	if err != nil {
		t.Fatalf("probes from %s: %v", a.name, err)
	}
	got := map[string]string{}
	for _, line := range strings.Fields(out) {
		k, v, _ := strings.Cut(line, "=")
		got[k] = v
	}
	return got
}

// spoofedPing pings the gateway from a with a source address the seed did
// not give it.
func spoofedPing(t *testing.T, ctx context.Context, a *testGuest, spoof, gw string) string {
	t.Helper()
	out, err := a.ssh(ctx, fmt.Sprintf(`sudo ip addr add %[1]s/32 dev mgmt0 2>/dev/null
if ping -c 1 -W 2 -I %[1]s %[2]s >/dev/null 2>&1; then echo ok; else echo fail; fi
sudo ip addr del %[1]s/32 dev mgmt0`, spoof, gw))
	if err != nil {
		t.Fatalf("spoofed ping from %s: %v", a.name, err)
	}
	return strings.TrimSpace(out)
}

func setIsolated(t *testing.T, on bool, devs ...string) {
	t.Helper()
	v := "off"
	if on {
		v = "on"
	}
	for _, d := range devs {
		run(t, "bridge", "link", "set", "dev", d, "isolated", v)
	}
}

// TestSliceIsolation is issue item 2's acceptance on two real guests.
func TestSliceIsolation(t *testing.T) {
	requireGuests(t)
	if _, err := exec.LookPath("nft"); err != nil {
		t.Fatal("nft is not installed: apt-get install -y nftables (or scripts/deps test)")
	}
	ctx, cancel := context.WithTimeout(t.Context(), 15*time.Minute)
	defer cancel()
	img := buildMinimal(t, ctx)
	kvm := kvmRunsKernelOnce(t, ctx, img.Image)
	h, err := libvirt.New(ctx, libvirt.Config{URI: systemURI})
	if err != nil {
		t.Fatalf("connect to %s: %v", systemURI, err)
	}
	t.Cleanup(func() { h.Close() })

	suffix := randHex(4)
	prefix := freeTestPrefix(t)
	gw := prefix + "1"
	spec := libvirt.NetworkSpec{Name: "gpuaas-test-" + suffix, Bridge: "gpt-" + suffix, Gateway: netip.MustParsePrefix(gw + "/24")}
	t.Cleanup(func() { // also after a failed EnsureNetwork that defined it
		if err := h.RemoveNetwork(context.Background(), spec.Name); err != nil {
			t.Errorf("remove network: %v", err)
		}
	})
	if err := h.EnsureNetwork(ctx, spec); err != nil {
		t.Fatalf("ensure network: %v", err)
	}
	if err := h.EnsureNetwork(ctx, spec); err != nil { // hostd restarting
		t.Fatalf("ensure network again: %v", err)
	}
	if out := run(t, "virsh", "-c", systemURI, "net-dumpxml", spec.Name); !strings.Contains(out, "<port isolated='yes'/>") || strings.Contains(out, "<dhcp") {
		t.Errorf("network XML has no isolated ports or has DHCP:\n%s", out)
	}
	if out, _ := exec.Command("pgrep", "-af", "dnsmasq.*"+spec.Name).CombinedOutput(); strings.TrimSpace(string(out)) != "" {
		t.Errorf("libvirt started dnsmasq for %s: %s", spec.Name, out)
	}

	fw, err := netiso.New(netiso.Config{Table: "gpuaas_test_" + suffix})
	if err != nil {
		t.Fatal(err)
	}
	if err := fw.Install(ctx); err != nil {
		t.Fatalf("install nft table: %v", err)
	}
	t.Cleanup(func() {
		if err := fw.Remove(context.Background()); err != nil {
			t.Errorf("remove nft table: %v", err)
		}
	})
	ports := map[string]netiso.Port{}
	register := func(g *testGuest) {
		dev, err := h.InterfaceDevice(ctx, g.name, g.mac)
		if err != nil {
			t.Fatalf("interface of %s: %v", g.name, err)
		}
		// hostd/tasks finds the tap by libvirt's 0xfe MAC (no libvirt call).
		if tap, err := netiso.TapDevice("/sys/class/net", g.mac); err != nil || tap != dev {
			t.Errorf("TapDevice(%s) = %q, %v; want libvirt's %s", g.mac, tap, err, dev)
		}
		p := netiso.Port{Dev: dev, MAC: g.mac, IP: netip.MustParseAddr(g.ip)}
		if err := fw.AddPort(ctx, p); err != nil {
			t.Fatalf("add port %v: %v", p, err)
		}
		ports[g.name] = p
	}
	a := bootMinimal(t, ctx, h, img.Image, kvm, spec.Name, prefix+"10", gw, register)
	t.Logf("guest A %s on %s: SSH after %.1fs", a.ip, ports[a.name].Dev, a.booted.Seconds())
	b := bootMinimal(t, ctx, h, img.Image, kvm, spec.Name, prefix+"11", gw, register)
	t.Logf("guest B %s on %s: SSH after %.1fs", b.ip, ports[b.name].Dev, b.booted.Seconds())
	devs := []string{ports[a.name].Dev, ports[b.name].Dev}
	reinstall := func() {
		if err := fw.Install(ctx); err != nil {
			t.Fatal(err)
		}
		for _, p := range ports {
			if err := fw.AddPort(ctx, p); err != nil {
				t.Fatal(err)
			}
		}
	}
	blocked := map[string]string{"ping": "fail", "arping": "fail", "tcp": "fail", "gateway": "ok"}
	open := map[string]string{"ping": "ok", "arping": "ok", "tcp": "ok", "gateway": "ok"}
	check := func(step string, want map[string]string) {
		t.Helper()
		got := probe(t, ctx, a, b.ip, gw)
		for k, w := range want {
			if got[k] != w {
				t.Errorf("%s: probe %s from A to %s = %q; want %q (all: %v)", step, k, b.ip, got[k], w, got)
			}
		}
	}
	// The host side reaches each guest's sshd (TCP; the guests' pings to
	// the gateway are in the probes).
	hostReaches := func(step string, g *testGuest) {
		t.Helper()
		if out, err := g.ssh(ctx, "echo reached"); err != nil || out != "reached" {
			t.Errorf("%s: the host cannot reach %s's sshd: %q, %v", step, g.ip, out, err)
		}
	}

	// Both layers.
	check("isolated ports and nft", blocked)
	hostReaches("isolated ports and nft", a)
	hostReaches("isolated ports and nft", b)
	spoof := prefix + "99"
	if got := spoofedPing(t, ctx, a, spoof, gw); got != "fail" {
		t.Errorf("a ping from A with the spoofed source %s reached the gateway (%s); want it dropped", spoof, got)
	}

	// Port isolation alone.
	if err := fw.Remove(ctx); err != nil {
		t.Fatal(err)
	}
	check("isolated ports alone", blocked)
	// The spoof control: without the nft layer the spoofed source passes,
	// so the drop above was the nft layer's doing.
	if got := spoofedPing(t, ctx, a, spoof, gw); got != "ok" {
		t.Errorf("without nft, a ping from A with source %s = %s; want ok (the control of the spoofing check)", spoof, got)
	}

	// nft alone.
	reinstall()
	setIsolated(t, false, devs...)
	check("nft alone", blocked)

	// Neither: the control that shows the probes can pass.
	if err := fw.Remove(ctx); err != nil {
		t.Fatal(err)
	}
	check("no isolation (control)", open)

	// Back on, then release: no entry is left.
	setIsolated(t, true, devs...)
	reinstall()
	check("isolation restored", blocked)
	for _, g := range []*testGuest{a, b} {
		if err := h.Destroy(ctx, g.name); err != nil {
			t.Fatal(err)
		}
		if err := fw.RemoveMAC(ctx, g.mac); err != nil { // the vnet device is gone
			t.Fatal(err)
		}
		if err := h.Undefine(ctx, g.name); err != nil {
			t.Fatal(err)
		}
	}
	if left, err := fw.Ports(ctx); err != nil || len(left) != 0 {
		t.Errorf("nft entries after release = %v, %v; want none", left, err)
	}
	if left, err := fw.PortNames(ctx); err != nil || len(left) != 0 {
		t.Errorf("nft ports after release = %v, %v; want none", left, err)
	}
}
