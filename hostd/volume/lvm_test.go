package volume

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/gpuaas/gpuaas/internal/testutil"
	"golang.org/x/sys/unix"
)

// TestNewRefusesAVolumeGroupLVMDoesNotKnow: a --volume-group that names
// no group, or is no group name, stops hostd's volume store at start,
// not at the first volume task.
func TestNewRefusesAVolumeGroupLVMDoesNotKnow(t *testing.T) {
	requireLVM(t)
	for _, tc := range []struct{ name, vg string }{
		{"missing", "gpuaasnosuchgroup"},
		{"path", "vg/lv"},
		{"option", "-vg"},
		{"parent", ".."},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := New(Config{Dir: filepath.Join(t.TempDir(), "volumes"), VolumeGroup: tc.vg, Log: testutil.Logger(t)})
			if err == nil {
				t.Fatalf("New with volume group %q: no error; want one", tc.vg)
			}
		})
	}
}

// TestLVMStoreSeesOnlyItsOwnVolumes: the group's free space is what
// vgs reports, an LV the operator keeps in the group is never a volume,
// and a volume larger than the free space is refused before anything is
// made. It needs no device-mapper (LVM's metadata only), so it runs
// where the other LVM tests cannot.
func TestLVMStoreSeesOnlyItsOwnVolumes(t *testing.T) {
	requireLVM(t)
	if testing.Short() {
		t.Skip("makes a volume group")
	}
	// LVM warns, in the combined output hostd reads, of every descriptor
	// it inherits; hostd's parent may leave it some. The store reads its
	// reports through such warnings.
	t.Setenv("LVM_SUPPRESS_FD_WARNINGS", "") // restored after the test
	os.Unsetenv("LVM_SUPPRESS_FD_WARNINGS")  // LVM asks only whether it is set
	leak, err := os.Open(os.DevNull)
	if err != nil {
		t.Fatal(err)
	}
	defer leak.Close()
	if _, err := unix.FcntlInt(leak.Fd(), unix.F_SETFD, 0); err != nil {
		t.Fatal(err)
	}
	s, _ := newStoreMetadataOnly(t)
	ctx := t.Context()
	// An LV of the operator's, made without activation (so without
	// device-mapper), taking 32 MiB of the group.
	mustRun(t, "lvcreate", "--driverloaded", "n", "--yes", "--activate", "n", "--zero", "n",
		"--wipesignatures", "n", "--size", "32m", "--name", "scratch", s.cfg.VolumeGroup)
	free, err := s.Free(ctx)
	if err != nil {
		t.Fatal(err)
	}
	want, err := strconv.ParseInt(strings.TrimSpace(mustRun(t, "vgs", "--noheadings", "--nosuffix",
		"--units", "b", "-o", "vg_free", s.cfg.VolumeGroup)), 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	if free != want || free > 256*MiB-32*MiB {
		t.Fatalf("Free = %d; want vgs's %d, below the group's 256 MiB less the operator's 32", free, want)
	}
	// A volume a crash left half made is not a volume either.
	mustRun(t, "lvcreate", "--driverloaded", "n", "--yes", "--activate", "n", "--zero", "n",
		"--wipesignatures", "n", "--size", "4m", "--name", newPrefix+"vol-half", s.cfg.VolumeGroup)
	if got, err := s.List(ctx); err != nil || len(got) != 0 {
		t.Fatalf("List = %v, %v; want no volume (the operator's LV is not one)", got, err)
	}
	if got, err := s.b.ids(ctx); err != nil || len(got) != 0 {
		t.Fatalf("ids = %v, %v; want none (neither the operator's LV nor one half made)", got, err)
	}
	if got, err := s.b.rounded(ctx, 17*MiB); err != nil || got != 20*MiB {
		t.Fatalf("17 MiB rounded to %d, %v; want 20 MiB (whole 4 MiB extents)", got, err)
	}
	if _, err := s.Create(ctx, "vol-big", (free/MiB+4)*MiB); !errors.Is(err, ErrNoSpace) {
		t.Fatalf("Create past the group's free space: %v; want ErrNoSpace", err)
	}
	out := mustRun(t, "lvs", "--noheadings", "-o", "lv_name", s.cfg.VolumeGroup)
	if got := strings.Fields(out); len(got) != 2 {
		t.Fatalf("LVs after a refused Create: %q; want the two made above alone", out)
	}
	if _, err := s.Stat(ctx, "vol-big"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("Stat of a volume never made: %v; want ErrNotFound", err)
	}
}

// newStoreMetadataOnly is an LVM store on a 256 MiB test group, for tests
// of what needs no activated LV.
func newStoreMetadataOnly(t *testing.T) (*Images, string) {
	t.Helper()
	if _, err := exec.LookPath("losetup"); err != nil {
		t.Skip("no losetup")
	}
	base := t.TempDir()
	// Made by hand, not by New: New refuses a kernel without
	// device-mapper, and this store is for the metadata alone.
	cfg := Config{Dir: filepath.Join(base, "volumes"), VolumeGroup: testVG(t, 256*MiB), Log: testutil.Logger(t)}
	if err := cfg.CheckAndSetDefaults(); err != nil {
		t.Fatal(err)
	}
	return &Images{cfg: cfg, b: &lvm{vg: cfg.VolumeGroup, runner: cfg.Runner}}, base
}

// TestNewRefusesLVMWithoutDeviceMapper: on a kernel without
// device-mapper LVM still reads a group, but no LV can be activated;
// hostd --volume-group stops at start saying so, instead of failing
// every volume task.
func TestNewRefusesLVMWithoutDeviceMapper(t *testing.T) {
	requireLVM(t)
	if deviceMapper() == nil {
		t.Skip("this kernel has device-mapper")
	}
	vg := testVG(t, 64*MiB)
	_, err := New(Config{Dir: filepath.Join(t.TempDir(), "volumes"), VolumeGroup: vg, Log: testutil.Logger(t)})
	if !errors.Is(err, errors.ErrUnsupported) || !strings.Contains(err.Error(), "device-mapper") {
		t.Fatalf("New with group %s on a kernel without device-mapper: %v; want ErrUnsupported naming device-mapper", vg, err)
	}
}
