package e2e

import (
	"context"
	"os/exec"
	"strings"
	"testing"

	"github.com/gpuaas/gpuaas/hostd/netiso"
)

// devSliceTable is `gpuaas dev --vm`'s nft bridge table
// (internal/devenv/vmhost.go).
const devSliceTable = "gpuaas_dev_slices"

// isolationControl is TestSliceVM's control step, as hostd/guestimage's
// TestSliceIsolation has: with both isolation layers switched off (dev's
// nft bridge table removed, the guests' bridge ports no longer isolated)
// the probes from guest A to guest B at ipB (ping, arping, TCP to its sshd)
// succeed, so their failure was the isolation's doing and not a
// broken probe; with both layers back they fail again. The same for a ping
// from A to its gateway gw with a source address the seed did not give A
// (spoofed): dropped by the nft layer, passing without it. inA runs a
// command in guest A and returns its exit status.
func isolationControl(t *testing.T, inA func(cmd string) int, ipB, gw string) {
	t.Helper()
	ctx := context.Background()
	fw, err := netiso.New(netiso.Config{Table: devSliceTable})
	if err != nil {
		t.Fatal(err)
	}
	ports, err := fw.Ports(ctx)
	if err != nil || len(ports) < 2 {
		t.Fatalf("dev's nft table lists %+v (%v); want both guests' ports", ports, err)
	}
	isolated := func(on string) {
		t.Helper()
		for _, p := range ports {
			if out, err := exec.Command("bridge", "link", "set", "dev", p.Dev, "isolated", on).CombinedOutput(); err != nil {
				t.Fatalf("bridge link set dev %s isolated %s: %v %s", p.Dev, on, err, out)
			}
		}
	}
	restored := false
	restore := func() {
		if restored {
			return
		}
		restored = true
		isolated("on")
		if err := fw.Install(ctx); err != nil {
			t.Fatalf("reinstall dev's nft table: %v", err)
		}
		for _, p := range ports {
			if err := fw.AddPort(ctx, p); err != nil {
				t.Fatalf("re-add port %+v: %v", p, err)
			}
		}
	}
	defer restore()
	// hostd/guestimage's probes (isolation_test.go): the TCP one passes
	// only when B's sshd banner comes back.
	probes := map[string]string{"ping": "sudo ping -c 1 -W 3 " + ipB, "arping": "sudo arping -c 1 -w 2 -I mgmt0 " + ipB,
		"tcp": "sleep 2 | nc -w 3 " + ipB + " 22 | head -c 4 | grep -q SSH-", "spoofed source": spoofedPing(gw)}

	if err := fw.Remove(ctx); err != nil {
		t.Fatal(err)
	}
	isolated("off")
	for name, cmd := range probes {
		if code := inA(cmd); code != 0 {
			t.Errorf("isolation off (control): probe %s from A to %s exit %d; want it to pass", name, ipB, code)
		}
	}
	restore()
	for name, cmd := range probes {
		if code := inA(cmd); code == 0 {
			t.Errorf("isolation restored: probe %s from A to %s passed; want it blocked", name, ipB)
		}
	}
}

// spoofedPing is a guest command that pings gw from an address on the
// slot network no slot is given (the network's .250), then drops it again;
// its exit status is the ping's.
func spoofedPing(gw string) string {
	spoof := gw[:strings.LastIndex(gw, ".")] + ".250"
	return "sudo ip addr add " + spoof + "/32 dev mgmt0; ping -c 1 -W 3 -I " + spoof + " " + gw +
		"; rc=$?; sudo ip addr del " + spoof + "/32 dev mgmt0; exit $rc"
}
