package netiso

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
)

// requireNFT fails without root and nft (scripts/deps test installs it).
func requireNFT(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Fatal("netiso's tests change the host's nftables ruleset and need root")
	}
	if _, err := exec.LookPath("nft"); err != nil {
		t.Fatal("nft is not installed: apt-get install -y nftables (or scripts/deps test)")
	}
}

func newTestFirewall(t *testing.T) *Firewall {
	t.Helper()
	b := make([]byte, 4)
	rand.Read(b)
	f, err := New(Config{Table: "gpuaas_test_" + hex.EncodeToString(b)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := f.Remove(context.Background()); err != nil {
			t.Errorf("remove table: %v", err)
		}
	})
	return f
}

// TestFirewallEntries: ports are added and removed as set elements, the
// rules' reinstall keeps them, bad input is refused and changes nothing,
// and Remove leaves no table.
func TestFirewallEntries(t *testing.T) {
	requireNFT(t)
	ctx := t.Context()
	f := newTestFirewall(t)
	if err := f.Install(ctx); err != nil {
		t.Fatalf("install: %v", err)
	}
	a := Port{Dev: "vnet91", MAC: "52:54:00:aa:bb:01", IP: netip.MustParseAddr("10.213.7.10")}
	b := Port{Dev: "vnet92", MAC: "52:54:00:AA:BB:02", IP: netip.MustParseAddr("10.213.7.11")}
	for _, p := range []Port{a, b} {
		if err := f.AddPort(ctx, p); err != nil {
			t.Fatalf("add %v: %v", p, err)
		}
	}
	for _, bad := range []Port{
		{Dev: "vnet 1", MAC: a.MAC, IP: a.IP},
		{Dev: "vnet93", MAC: "01:00:5e:00:00:01", IP: a.IP},
		{Dev: "vnet93", MAC: a.MAC, IP: netip.MustParseAddr("::1")},
		{Dev: `x"; flush ruleset`, MAC: a.MAC, IP: a.IP},
	} {
		if err := f.AddPort(ctx, bad); !errors.Is(err, ErrInvalidPort) {
			t.Errorf("AddPort(%v) = %v; want ErrInvalidPort", bad, err)
		}
	}
	if err := f.Install(ctx); err != nil { // hostd restarting
		t.Fatalf("reinstall: %v", err)
	}
	got, err := f.Ports(ctx)
	if err != nil {
		t.Fatal(err)
	}
	want := []Port{a, {Dev: b.Dev, MAC: strings.ToLower(b.MAC), IP: b.IP}}
	if len(got) != 2 || got[0] != want[0] || got[1] != want[1] {
		t.Fatalf("Ports = %v; want %v", got, want)
	}
	if err := f.RemovePort(ctx, a.Dev); err != nil {
		t.Fatal(err)
	}
	if err := f.RemovePort(ctx, a.Dev); err != nil {
		t.Errorf("second RemovePort: %v; want nil", err)
	}
	if got, _ := f.Ports(ctx); len(got) != 1 || got[0].Dev != b.Dev {
		t.Errorf("Ports after removing %s = %v; want only %s", a.Dev, got, b.Dev)
	}
	rules, err := exec.Command("nft", "list", "table", "bridge", f.cfg.Table).CombinedOutput()
	if err != nil {
		t.Fatalf("nft list table: %v\n%s", err, rules)
	}
	if names, err := f.PortNames(ctx); err != nil || len(names) != 1 || names[0] != b.Dev {
		t.Errorf("PortNames after removing %s = %v, %v; want only %s", a.Dev, names, err, b.Dev)
	}
	for _, w := range []string{"iifname != @ports accept", "oifname @ports counter", "drop"} {
		if !strings.Contains(string(rules), w) {
			t.Errorf("table has no %q:\n%s", w, rules)
		}
	}
	if err := f.RemoveMAC(ctx, "52:54:00:aa:bb:02"); err != nil { // b's, spelt in lower case
		t.Fatal(err)
	}
	if got, _ := f.Ports(ctx); len(got) != 0 {
		t.Errorf("Ports after RemoveMAC(%s) = %v; want none", b.MAC, got)
	}
	if names, _ := f.PortNames(ctx); len(names) != 0 {
		t.Errorf("PortNames after RemoveMAC(%s) = %v; want none", b.MAC, names)
	}
	if err := f.RemoveMAC(ctx, "not-a-mac"); !errors.Is(err, ErrInvalidPort) {
		t.Errorf("RemoveMAC(not-a-mac) = %v; want ErrInvalidPort", err)
	}
	if err := f.Remove(ctx); err != nil {
		t.Fatal(err)
	}
	if out, _ := exec.Command("nft", "list", "tables", "bridge").CombinedOutput(); strings.Contains(string(out), f.cfg.Table) {
		t.Errorf("table %s still there after Remove:\n%s", f.cfg.Table, out)
	}
	if ports, err := f.Ports(ctx); err != nil || len(ports) != 0 {
		t.Errorf("Ports after Remove = %v, %v; want none", ports, err)
	}
}

// TestTapDevice: the tap is the interface whose MAC is the guest's with
// the first octet 0xfe (TestSliceIsolation checks it against libvirt).
func TestTapDevice(t *testing.T) {
	sys := t.TempDir()
	for dev, mac := range map[string]string{"eth0": "52:54:00:12:34:56", "vnet3": "fe:54:00:12:34:56", "vnet4": "fe:54:00:12:34:57"} {
		if err := os.MkdirAll(filepath.Join(sys, dev), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(sys, dev, "address"), []byte(mac+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if got, err := TapDevice(sys, "52:54:00:12:34:56"); err != nil || got != "vnet3" {
		t.Errorf("TapDevice = %q, %v; want vnet3", got, err)
	}
	if _, err := TapDevice(sys, "52:54:00:12:34:58"); err == nil {
		t.Errorf("TapDevice of a MAC without a tap: no error")
	}
	if _, err := TapDevice(sys, "zz"); !errors.Is(err, ErrInvalidPort) {
		t.Errorf("TapDevice(zz) = %v; want ErrInvalidPort", err)
	}
}
