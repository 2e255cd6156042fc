package daemon

import (
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net/netip"
	"os"
	"path/filepath"
	"testing"

	"github.com/gpuaas/gpuaas/hostd/guestimage"
	"github.com/gpuaas/gpuaas/hostd/libvirt"
	"github.com/gpuaas/gpuaas/hostd/netiso"
	"github.com/gpuaas/gpuaas/hostd/tasks"
	"github.com/gpuaas/gpuaas/internal/testutil"
)

// realSliceHost is what the real-guest tests share: the minimal guest
// image and a slice host set up as hostd's start-up does it
// (sliceFlags.sliceHost: its own isolated network and nft table, emulated,
// no passthrough), both removed when the test ends.
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
