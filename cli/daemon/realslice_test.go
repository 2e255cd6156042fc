package daemon

import (
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/gpuaas/gpuaas/hostd/guestimage"
	"github.com/gpuaas/gpuaas/hostd/host"
	"github.com/gpuaas/gpuaas/hostd/libvirt"
	"github.com/gpuaas/gpuaas/hostd/netiso"
	"github.com/gpuaas/gpuaas/hostd/tasks"
	"github.com/gpuaas/gpuaas/internal/testutil"
)

// realSliceHost is what the real-guest tests share: the minimal guest
// image and a slice host set up as hostd's start-up does it
// (sliceFlags.sliceHost: its own isolated network and nft table, emulated,
// no passthrough), both removed when the test ends with any guest still
// on the network.
type realSliceHost struct {
	img    guestimage.Result
	suffix string       // names the network, bridge and table
	subnet netip.Prefix // the slots' network
	table  string       // the nft table
	net    *tasks.SliceNet
	host   *tasks.SliceHost
	log    *slog.Logger
}

func startRealSliceHost(ctx context.Context, t *testing.T, hv *libvirt.Hypervisor) realSliceHost {
	t.Helper()
	img, err := guestimage.BuildMinimal(ctx, guestimage.Config{})
	if err != nil {
		t.Fatal(err)
	}
	suffix := fmt.Sprintf("%06x", rand.IntN(1<<24))
	subnet := freeSlotSubnet(t)
	table := "gpuaas_test_" + suffix
	flags := sliceFlags{Network: "gpuaas-test-" + suffix, Bridge: "gpt-" + suffix, Subnet: subnet.String(),
		Emulate: true, Passthrough: false, table: table}
	t.Cleanup(func() {
		// A test that failed before its release leaves its guests running
		// on the network; none outlives the test (docs/slices.md, "Guests
		// left behind").
		if cleared, err := tasks.ClearNetworkGuests(context.Background(), hv, flags.Network, nil); len(cleared) > 0 || err != nil {
			t.Logf("removed guests the test left on %s: %v (%v)", flags.Network, cleared, err)
		}
		_ = hv.RemoveNetwork(context.Background(), flags.Network)
		if fw, err := netiso.New(netiso.Config{Table: table}); err == nil {
			_ = fw.Remove(context.Background())
		}
	})
	log := testutil.Logger(t)
	sn, sh := flags.sliceHost(ctx, hv, log)
	if sn == nil || len(sh.Blockers) > 0 {
		t.Fatalf("slice host not set up: %+v", sh.Blockers)
	}
	return realSliceHost{img: img, suffix: suffix, subnet: subnet, table: table, net: sn, host: sh, log: log}
}

// stateDir makes hostd's state directory as hostdRun does on a real host:
// 0711 below /var/lib (0755), which the test's temporary parents stand
// for — QEMU (libvirt's user) must traverse it to the guests' disks.
func (realSliceHost) stateDir(t *testing.T) string {
	t.Helper()
	parent := t.TempDir()
	state := filepath.Join(parent, "hostd")
	for _, d := range []string{filepath.Dir(parent), parent} {
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Mkdir(state, 0o711); err != nil {
		t.Fatal(err)
	}
	return state
}

// TestRealSliceHostClearsLeftGuests: a real-guest test that ends before
// its release (here a subtest that simply returns) leaves a running guest
// on its slice network; startRealSliceHost's cleanup destroys and
// undefines it, and leaves alone a domain on no network.
func TestRealSliceHostClearsLeftGuests(t *testing.T) {
	hv := realGuestHost(t)
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Minute)
	defer cancel()
	suffix := fmt.Sprintf("%06x", rand.IntN(1<<24))
	left, bystander := "a-left"+suffix, "gpuaas-test-bystander-"+suffix
	define := func(t *testing.T, name, devices string, start bool) {
		xml := fmt.Sprintf(`<domain type='qemu'><name>%s</name><memory unit='MiB'>32</memory><vcpu>1</vcpu>
<os><type arch='x86_64' machine='q35'>hvm</type></os><devices>%s</devices></domain>`, name, devices)
		p := filepath.Join(t.TempDir(), name+".xml")
		if err := os.WriteFile(p, []byte(xml), 0o644); err != nil {
			t.Fatal(err)
		}
		args := [][]string{{"define", p}}
		if start {
			args = append(args, []string{"start", name})
		}
		for _, a := range args {
			if out, err := exec.Command("virsh", append([]string{"-c", libvirt.DefaultURI}, a...)...).CombinedOutput(); err != nil {
				t.Fatalf("virsh %v: %v\n%s", a, err, out)
			}
		}
	}
	t.Cleanup(func() { // the test's own safety net, whatever happens above
		for _, name := range []string{left, bystander} {
			_ = hv.Destroy(context.Background(), name)
			_ = hv.Undefine(context.Background(), name)
		}
	})
	var network string
	t.Run("a test that fails before release", func(t *testing.T) {
		rs := startRealSliceHost(ctx, t, hv)
		network = rs.net.Network
		define(t, left, fmt.Sprintf(`<interface type='network'><source network='%s'/><mac address='52:54:00:%02x:%02x:%02x'/><model type='virtio'/><rom enabled='no'/></interface>`,
			network, rand.IntN(256), rand.IntN(256), rand.IntN(256)), true)
		define(t, bystander, "", false)
		if st, err := hv.State(ctx, left); err != nil || st != host.DomainRunning {
			t.Fatalf("the left guest is %s (%v); want running", st, err)
		}
	})
	names, err := hv.List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if slices.Contains(names, left) {
		t.Errorf("guest %s on %s outlived its test: %v", left, network, names)
	}
	if !slices.Contains(names, bystander) {
		t.Errorf("the cleanup removed %s, which is on no test network", bystander)
	}
}
