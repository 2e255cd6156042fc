package tasks

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	mrand "math/rand/v2"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gpuaas/gpuaas/hostd/guestimage"
	"github.com/gpuaas/gpuaas/hostd/host"
	"github.com/gpuaas/gpuaas/hostd/libvirt"
	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/hostproto"
)

// TestWaitMarkerRealGuest boots the minimal test image (hostd/guestimage)
// through libvirt with the seed hostd writes (seedFiles, makeVMKey) and
// checks readiness by marker: ready with the driver check's text; a guest
// whose driver check fails is ErrDriverCheck with the reason at once; a
// guest that cannot read its seed is ErrNotReady at the deadline, quoting
// its serial log. Guests run under TCG (correct everywhere, the subject is
// the marker, not the hypervisor).
func TestWaitMarkerRealGuest(t *testing.T) {
	if testing.Short() {
		t.Skip("boots guests; skipped with -short")
	}
	if os.Geteuid() != 0 {
		t.Fatal("boots guests through qemu:///system and needs root (scripts/deps test), or go test -short")
	}
	for _, tool := range []string{"qemu-system-x86_64", "qemu-img", "genisoimage"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("%s is missing (scripts/deps test), or go test -short", tool)
		}
	}
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Minute)
	defer cancel()
	img, err := guestimage.BuildMinimal(ctx, guestimage.Config{})
	if err != nil {
		t.Fatal(err)
	}
	h, err := libvirt.New(ctx, libvirt.Config{URI: "qemu:///system"})
	if err != nil {
		t.Fatalf("libvirt: %v", err)
	}
	t.Cleanup(func() { h.Close() })
	suffix := randHex(t, 4)
	prefix := freePrefix(t)
	netName := "gpuaas-test-" + suffix
	t.Cleanup(func() { _ = h.RemoveNetwork(context.Background(), netName) })
	if err := h.EnsureNetwork(ctx, libvirt.NetworkSpec{Name: netName, Bridge: "gpt-" + suffix,
		Gateway: netip.MustParsePrefix(prefix + "1/24")}); err != nil {
		t.Fatal(err)
	}

	// boot starts a minimal guest with hostd's seed for alloc; extraMeta
	// is appended to its meta-data.
	boot := func(alloc, ip, extraMeta, volid string) SlicePaths {
		dir := t.TempDir()
		for _, d := range []string{dir, filepath.Dir(dir)} { // QEMU runs as libvirt-qemu
			if err := os.Chmod(d, 0o755); err != nil {
				t.Fatal(err)
			}
		}
		paths := PathsFor(dir, alloc)
		mac := fmt.Sprintf("52:54:00:%s:%s:%s", randHex(t, 1), randHex(t, 1), randHex(t, 1))
		p := hostproto.VMProvisionParams{AllocationID: alloc, PosixUser: "renter", Slots: []api.Slot{{MAC: mac, IP: ip + "/24"}}}
		vmKey, err := makeVMKey(paths, alloc)
		if err != nil {
			t.Fatal(err)
		}
		user, meta, network, err := seedFiles(p, []string{vmKey})
		if err != nil {
			t.Fatal(err)
		}
		iso := filepath.Join(dir, "seed.iso")
		if err := guestimage.WriteSeedISO(ctx, iso, guestimage.SeedFiles{UserData: user,
			MetaData: append(meta, extraMeta...), NetworkConfig: network}); err != nil {
			t.Fatal(err)
		}
		if volid != "cidata" { // a seed the guest cannot find: relabel it
			stage := t.TempDir()
			for name, data := range map[string][]byte{"user-data": user, "meta-data": meta, "network-config": network} {
				if err := os.WriteFile(filepath.Join(stage, name), data, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			if out, err := exec.Command("genisoimage", "-quiet", "-output", iso, "-volid", volid, "-joliet", "-rock",
				filepath.Join(stage, "user-data"), filepath.Join(stage, "network-config")).CombinedOutput(); err != nil {
				t.Fatalf("genisoimage: %v\n%s", err, out)
			}
		}
		overlay := filepath.Join(dir, "overlay.qcow2")
		if out, err := exec.Command("qemu-img", "create", "-q", "-f", "qcow2", "-F", "qcow2", "-b", img.Disk, overlay).CombinedOutput(); err != nil {
			t.Fatalf("qemu-img: %v\n%s", err, out)
		}
		spec := host.DomainSpec{Name: alloc, VCPUs: 1, MemoryMiB: 384, NUMANode: -1,
			Disks: []host.Disk{{Source: overlay, Target: "vda"}}, SeedISO: iso,
			Kernel: img.Kernel, Initrd: img.Initrd, Cmdline: img.Manifest.Cmdline, MAC: mac, Network: netName, Emulate: true,
			SerialLog: serialLogPath(paths)}
		if err := os.MkdirAll(paths.SeedDir, 0o700); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			_ = h.Destroy(context.Background(), alloc)
			_ = h.Undefine(context.Background(), alloc)
		})
		if err := h.Define(ctx, spec); err != nil {
			t.Fatal(err)
		}
		if err := h.Start(ctx, alloc); err != nil {
			t.Fatal(err)
		}
		return paths
	}
	c := Config{ReadinessTimeout: 3 * time.Minute, PollInterval: 250 * time.Millisecond}

	alloc := "gpuaas-kvmtest-" + randHex(t, 4)
	paths := boot(alloc, prefix+"10", "", "cidata")
	start := time.Now()
	marker, err := c.waitMarker(ctx, prefix+"10:22", "renter", paths.VMKey, serialLogPath(paths))
	if err != nil {
		t.Fatalf("waitMarker: %v", err)
	}
	if want := "ok: no GPUs expected (instance " + alloc + ")"; marker != want {
		t.Errorf("marker = %q; want %q", marker, want)
	}
	t.Logf("minimal guest with hostd's seed ready (marker read) %.1fs after start", time.Since(start).Seconds())

	// The driver check fails: at once, with the guest's reason.
	failed := "gpuaas-kvmtest-" + randHex(t, 4)
	fpaths := boot(failed, prefix+"11", guestimage.MetaDriverCheck+": fail\n", "cidata")
	_, err = c.waitMarker(ctx, prefix+"11:22", "renter", fpaths.VMKey, serialLogPath(fpaths))
	if !errors.Is(err, ErrDriverCheck) || !strings.Contains(err.Error(), "forced to fail by the seed") {
		t.Errorf("waitMarker on a failed driver check = %v; want ErrDriverCheck with the guest's reason", err)
	}
	if err := h.Destroy(ctx, failed); err != nil {
		t.Fatal(err)
	}

	// A seed the guest cannot read (no cidata label): no user, no key, no
	// marker; the deadline's reason quotes the guest's serial log.
	lost := "gpuaas-kvmtest-" + randHex(t, 4)
	lpaths := boot(lost, prefix+"12", "", "notcidata")
	slow := Config{ReadinessTimeout: 90 * time.Second, PollInterval: time.Second}
	_, err = slow.waitMarker(ctx, prefix+"12:22", "renter", lpaths.VMKey, serialLogPath(lpaths))
	if !errors.Is(err, ErrNotReady) || !strings.Contains(err.Error(), "serial log ends") || !strings.Contains(err.Error(), "no NoCloud seed") {
		t.Errorf("waitMarker on a guest without its seed = %v; want ErrNotReady quoting the serial log's 'no NoCloud seed'", err)
	}
}

func randHex(t *testing.T, n int) string {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b)
}

// freePrefix is a "10.213.N." no route on this host uses.
func freePrefix(t *testing.T) string {
	routes, err := exec.Command("ip", "-4", "route").CombinedOutput()
	if err != nil {
		t.Fatalf("ip -4 route: %v\n%s", err, routes)
	}
	for range 50 {
		p := fmt.Sprintf("10.213.%d.", 1+mrand.IntN(254))
		if !strings.Contains(string(routes), p) {
			return p
		}
	}
	t.Fatal("no free 10.213.N.0/24")
	return ""
}
