package volume

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"
)

// TestMountedVolumeUsesDirectIO: a mounted volume's loop device has
// direct I/O on (loop(4): /sys/block/loopN/loop/dio), so what a tenant
// writes with O_DIRECT reaches the node's disk without a copy in the
// image file's page cache (docs/volumes.md, "Throughput"); Unmount
// leaves no loop device behind.
func TestMountedVolumeUsesDirectIO(t *testing.T) {
	s, base := newStore(t)
	ctx := context.Background()
	if _, err := s.Create(ctx, "vol-dio", 64<<20); err != nil {
		t.Fatal(err)
	}
	target := filepath.Join(base, "dio")
	if _, err := s.Mount(ctx, "vol-dio", target, 61821, 61821); err != nil {
		t.Fatal(err)
	}
	img := s.image("vol-dio")
	loops, err := loopsOf(img)
	if err != nil {
		t.Fatal(err)
	}
	if len(loops) != 1 {
		t.Fatalf("loop devices of the image: %v; want one", loops)
	}
	dio, err := os.ReadFile("/sys/block/" + filepath.Base(loops[0]) + "/loop/dio")
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.TrimSpace(string(dio)); got != "1" {
		t.Errorf("%s: dio = %s; want 1 (direct I/O)", loops[0], got)
	}
	if opts := mountOptions(t, target); !strings.Contains(opts, "nodev") || !strings.Contains(opts, "nosuid") {
		t.Errorf("mount options %q; want nodev,nosuid", opts)
	}

	// The image's pages left by mkfs and e2fsck are dropped; 32 MiB
	// written in the volume with O_DIRECT must not come back as them.
	dropCache(t, img)
	const size = 32 << 20
	f, err := os.OpenFile(filepath.Join(target, "seq"), os.O_CREATE|os.O_WRONLY|unix.O_DIRECT, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	buf := aligned(1<<20, 4096)
	for n := 0; n < size; n += len(buf) {
		if _, err := f.Write(buf); err != nil {
			t.Fatal(err)
		}
	}
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
	f.Close()
	if cached := cachedBytes(t, img); cached > size/4 {
		t.Errorf("%d MiB of the image in the page cache after a %d MiB O_DIRECT write in the volume; want the data cached once, not in the image's pages",
			cached>>20, size>>20)
	}

	if err := s.Unmount(ctx, "vol-dio"); err != nil {
		t.Fatal(err)
	}
	if loops, err := loopsOf(img); err != nil || len(loops) != 0 {
		t.Fatalf("after Unmount, loop devices of the image: %v (%v); want none", loops, err)
	}
}

// dropCache drops path's clean pages from the page cache.
func dropCache(t *testing.T, path string) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := unix.Fadvise(int(f.Fd()), 0, 0, unix.FADV_DONTNEED); err != nil {
		t.Fatal(err)
	}
}

// cachedBytes is how much of path is in the page cache (mincore(2)).
func cachedBytes(t *testing.T, path string) int {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		t.Fatal(err)
	}
	m, err := unix.Mmap(int(f.Fd()), 0, int(fi.Size()), unix.PROT_READ, unix.MAP_SHARED)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Munmap(m)
	page := os.Getpagesize()
	vec := make([]byte, (len(m)+page-1)/page)
	_, _, errno := unix.Syscall(unix.SYS_MINCORE, uintptr(unsafe.Pointer(&m[0])), uintptr(len(m)), uintptr(unsafe.Pointer(&vec[0])))
	if errno != 0 {
		t.Fatal("mincore:", errno)
	}
	n := 0
	for _, v := range vec {
		n += int(v & 1)
	}
	return n * page
}
