package volume

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/gpuaas/gpuaas/internal/mountinfo"
	"github.com/gpuaas/gpuaas/internal/testutil"
	"golang.org/x/sys/unix"
)

// newStore is a Store of image files in a directory of the test's own;
// volumes need root (loop devices, mount), as hostd has on a node.
func newStore(t *testing.T) (*Images, string) {
	t.Helper()
	return newStoreOn(t, backendImage)
}

// The backends a store test runs against (eachBackend).
const (
	backendImage = "image"
	backendLVM   = "lvm"
)

// eachBackend runs test once per backend, as subtests backend=image and
// backend=lvm: the store behaves the same over both
// (docs/decisions/0063-volumes-on-lvm.md). The LVM one is skipped, saying
// why, where the kernel has no device-mapper.
func eachBackend(t *testing.T, test func(t *testing.T, s *Images, base string)) {
	for _, b := range []string{backendImage, backendLVM} {
		t.Run("backend="+b, func(t *testing.T) {
			s, base := newStoreOn(t, b)
			test(t, s, base)
		})
	}
}

// newStoreOn is a store of backend kind: image files, or LVs of a volume
// group made for the test (testVG).
func newStoreOn(t testing.TB, kind string) (*Images, string) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("volumes need root (loop devices and mount)")
	}
	base := t.TempDir()
	// Allocation users must reach the mount points below it.
	for _, d := range []string{filepath.Dir(base), base} {
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	cfg := Config{Dir: filepath.Join(base, "volumes"), Log: testutil.Logger(t)}
	if kind == backendLVM {
		requireDeviceMapper(t)
		cfg.VolumeGroup = testVG(t, testVGSize)
	}
	s, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		// A failed test leaves nothing mounted or attached.
		ids, _ := s.b.ids(context.Background())
		for _, id := range ids {
			_ = s.Unmount(context.Background(), id)
		}
	})
	return s, base
}

// requireDeviceMapper skips a test of LVs where they cannot be activated:
// a kernel without device-mapper (deviceMapper),
// as this project's sandboxes have.
func requireDeviceMapper(t testing.TB) {
	t.Helper()
	requireLVM(t)
	if err := deviceMapper(); err != nil {
		t.Skipf("logical volumes cannot be activated here: %v", err)
	}
}

// requireLVM skips a test where lvm2 is not installed (scripts/deps test
// installs it).
func requireLVM(t testing.TB) {
	t.Helper()
	if _, err := exec.LookPath("vgcreate"); err != nil {
		t.Skip("lvm2 is not installed (scripts/deps test installs it)")
	}
}

// testVGSize is the size of a store test's volume group: room for the
// benchmark's 1 GiB volume; its file is sparse.
const testVGSize = 2 << 30

// testVG makes a volume group of size bytes for the test, on a loop
// device over a sparse file (no spare disk here), direct I/O on as a
// volume's loop device has; the cleanup removes it whatever the test
// left. The name is the test's own, so parallel packages never meet.
func testVG(t testing.TB, size int64) string {
	t.Helper()
	dir := t.TempDir()
	backing := filepath.Join(dir, "pv.img")
	f, err := os.Create(backing)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(size); err != nil {
		t.Fatal(err)
	}
	f.Close()
	pv := strings.TrimSpace(mustRun(t, "losetup", "--find", "--show", "--direct-io=on", backing))
	vg := fmt.Sprintf("gpuaastest%d%s", os.Getpid(), strings.TrimPrefix(filepath.Base(pv), "loop"))
	t.Cleanup(func() {
		_, _ = exec.Command("vgremove", "--force", "--yes", vg).CombinedOutput()
		_, _ = exec.Command("pvremove", "--force", "--yes", pv).CombinedOutput()
		_, _ = exec.Command("losetup", "-d", pv).CombinedOutput()
	})
	mustRun(t, "pvcreate", "--yes", pv)
	mustRun(t, "vgcreate", "--yes", vg, pv)
	testPV[vg] = pv
	return vg
}

// testPV is the physical volume of each test volume group.
var testPV = map[string]string{}

// mustRun runs a command and returns its standard output (LVM warns on
// stderr of descriptors a test process inherits).
func mustRun(t testing.TB, name string, args ...string) string {
	t.Helper()
	var stderr strings.Builder
	cmd := exec.Command(name, args...)
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s%s", name, strings.Join(args, " "), err, out, stderr.String())
	}
	return string(out)
}

// runAs runs a shell command as uid:gid (no account needed) and returns
// its combined output.
func runAs(t *testing.T, uid, gid int, script string) (string, error) {
	t.Helper()
	cmd := exec.Command("/bin/sh", "-c", script)
	cmd.Dir = "/"
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}}
	out, err := cmd.CombinedOutput()
	return string(out), err
}

func mustRunAs(t *testing.T, uid, gid int, script string) string {
	t.Helper()
	out, err := runAs(t, uid, gid, script)
	if err != nil {
		t.Fatalf("as %d: %s: %v: %s", uid, script, err, out)
	}
	return out
}

// owner is the uid of path.
func owner(t *testing.T, path string) int {
	t.Helper()
	fi, err := os.Lstat(path)
	if err != nil {
		t.Fatal(err)
	}
	return int(fi.Sys().(*syscall.Stat_t).Uid)
}

// isMountPoint says whether anything is mounted at path.
func isMountPoint(t *testing.T, path string) bool {
	t.Helper()
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(b), "\n") {
		f := strings.Fields(l)
		if len(f) > 4 && mountinfo.Unescape(f[4]) == path {
			return true
		}
	}
	return false
}

// mountOptions are the per-mount options of the mount at path.
func mountOptions(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(b), "\n") {
		f := strings.Fields(l)
		if len(f) > 5 && mountinfo.Unescape(f[4]) == path {
			return f[5]
		}
	}
	return ""
}

// overwrite writes b at the start of path (an image file, made if
// missing, or an LV's device) and syncs it.
func overwrite(path string, b []byte) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE, 0o600)
	if err != nil {
		return err
	}
	if _, err := f.Write(b); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// lvExtents is where LV lv of vg lies on its one physical volume: the
// byte offset and length (lvs's seg_pe_ranges, "/dev/loopN:first-last",
// with the group's extent size and the PV's first extent's offset).
func lvExtents(t *testing.T, vg, lv string) [2]int64 {
	t.Helper()
	field := func(out string) int64 {
		n, err := strconv.ParseInt(strings.TrimSpace(out), 10, 64)
		if err != nil {
			t.Fatalf("LVM printed %q", out)
		}
		return n
	}
	units := []string{"--noheadings", "--nosuffix", "--units", "b"}
	ext := field(mustRun(t, "vgs", append(units, "-o", "vg_extent_size", vg)...))
	start := field(mustRun(t, "pvs", append(units, "-o", "pe_start", testPV[vg])...))
	ranges := strings.TrimSpace(mustRun(t, "lvs", append(units, "-o", "seg_pe_ranges", vg+"/"+lv)...))
	_, span, ok := strings.Cut(ranges, ":")
	first, last, ok2 := strings.Cut(span, "-")
	if !ok || !ok2 || strings.Contains(ranges, " ") {
		t.Fatalf("lvs seg_pe_ranges %q; want one segment", ranges)
	}
	a, b := field(first), field(last)
	return [2]int64{start + a*ext, (b - a + 1) * ext}
}

// nonZero counts the bytes of dev in extents (offset, length) that are
// not zero, read with O_DIRECT: the PV's page cache knows nothing of what
// reached its blocks through the LV.
func nonZero(t *testing.T, dev string, extents [2]int64) int {
	t.Helper()
	f, err := os.OpenFile(dev, os.O_RDONLY|unix.O_DIRECT, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	buf := aligned(1<<20, 4096)
	n := 0
	for off := extents[0]; off < extents[0]+extents[1]; off += int64(len(buf)) {
		if _, err := f.ReadAt(buf, off); err != nil {
			t.Fatal(err)
		}
		for _, c := range buf {
			if c != 0 {
				n++
			}
		}
	}
	return n
}
