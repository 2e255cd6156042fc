package volume

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/gpuaas/gpuaas/hostd/host"
)

// benchStore is newStore for a benchmark.
func benchStore(b *testing.B) (*Images, string) {
	b.Helper()
	if os.Geteuid() != 0 {
		b.Skip("volumes need root (loop devices and mount)")
	}
	base := b.TempDir()
	for _, d := range []string{filepath.Dir(base), base} {
		if err := os.Chmod(d, 0o755); err != nil {
			b.Fatal(err)
		}
	}
	s, err := New(Config{Dir: filepath.Join(base, "volumes")})
	if err != nil {
		b.Fatal(err)
	}
	return s, base
}

// BenchmarkVolumeAttach times what a bare-metal provisioning adds for a
// volume: Mount of a 1 GiB volume holding 2,000 files of the previous
// renter (e2fsck -p, the loop mount, and giving every file to the new
// uid); attach-ms is Mount alone, the Unmount between ops is not timed.
func BenchmarkVolumeAttach(b *testing.B) {
	s, base := benchStore(b)
	ctx := context.Background()
	if _, err := s.Create(ctx, "vol-bench", 1<<30); err != nil {
		b.Fatal(err)
	}
	target := filepath.Join(base, "data")
	if _, err := s.Mount(ctx, "vol-bench", target, 61801, 61801); err != nil {
		b.Fatal(err)
	}
	for i := range 20 {
		dir := filepath.Join(target, fmt.Sprint(i))
		if err := os.Mkdir(dir, 0o755); err != nil {
			b.Fatal(err)
		}
		for j := range 100 {
			f := filepath.Join(dir, fmt.Sprint(j))
			if err := os.WriteFile(f, []byte("x"), 0o644); err != nil {
				b.Fatal(err)
			}
			if err := os.Lchown(f, 61801, 61801); err != nil {
				b.Fatal(err)
			}
		}
		if err := os.Lchown(dir, 61801, 61801); err != nil {
			b.Fatal(err)
		}
	}
	var mounted time.Duration
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		b.StopTimer()
		if err := s.Unmount(ctx, "vol-bench"); err != nil {
			b.Fatal(err)
		}
		uid := 61802 + i%2 // a new renter each time
		b.StartTimer()
		start := time.Now()
		info, err := s.Mount(ctx, "vol-bench", target, uid, uid)
		mounted += time.Since(start)
		if err != nil {
			b.Fatal(err)
		}
		if info.Reowned < 2000 {
			b.Fatalf("reowned %d files; want the 2,020 of the previous renter", info.Reowned)
		}
	}
	b.ReportMetric(float64(mounted.Milliseconds())/float64(b.N), "attach-ms")
	if err := s.Unmount(ctx, "vol-bench"); err != nil {
		b.Fatal(err)
	}
}

// BenchmarkVolumeThroughput writes then reads 256 MiB sequentially with
// O_DIRECT (1 MiB blocks) in a mounted 1 GiB volume (the acceptance's
// size) and in a file on "the node's disk directly": one op is both, the
// one going first alternating from op to op, so the two see the same load
// and neither always follows the other's writeback. Sub-benchmarks by
// backend (docs/decisions/0063-volumes-on-lvm.md):
//
//   - backend=image: the volume is an image file on a loop device with
//     direct I/O on (attach.go); the disk is a file beside the image. The
//     image has no pages of its own in the node's page cache; they are
//     dropped all the same (posix_fadvise DONTNEED, after the fsync)
//     before the volume's read, so that both reads come from the disk
//     even where the kernel refused direct I/O to the loop device.
//   - backend=lvm: the volume is an LV of a volume group whose one
//     physical volume is a loop device (direct I/O on) over a sparse file
//     — no spare disk in a sandbox; the disk is a plain ext4 filesystem
//     on a second loop device of the same kind (same backing filesystem,
//     same size, direct I/O on, the same mkfs options). The ratio is what
//     being a volume costs over the disk the group lives on. Skipped
//     where the kernel has no device-mapper.
func BenchmarkVolumeThroughput(b *testing.B) {
	b.Run("backend=image", func(b *testing.B) {
		s, base := benchStore(b)
		target := mountBenchVolume(b, s, base)
		dropImage := func() { dropPages(b, s.image("vol-tput")) }
		volumeThroughput(b, filepath.Join(target, "seq"), dropImage, filepath.Join(base, "seq"), func() {})
	})
	b.Run("backend=lvm", func(b *testing.B) {
		s, base := newStoreOn(b, backendLVM)
		target := mountBenchVolume(b, s, base)
		disk := plainDisk(b, base, testVGSize)
		pvFile := testPVFile(b, s.cfg.VolumeGroup)
		drop := func() { dropPages(b, pvFile) }
		volumeThroughput(b, filepath.Join(target, "seq"), drop, filepath.Join(disk, "seq"),
			func() { dropPages(b, filepath.Join(base, "disk.img")) })
	})
}

// mountBenchVolume creates and mounts the bench's 1 GiB volume.
func mountBenchVolume(b *testing.B, s *Images, base string) string {
	ctx := context.Background()
	if _, err := s.Create(ctx, "vol-tput", 1<<30); err != nil {
		b.Fatal(err)
	}
	target := filepath.Join(base, "tput")
	if _, err := s.Mount(ctx, "vol-tput", target, 61811, 61811); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = s.Unmount(ctx, "vol-tput"); _ = s.Delete(ctx, "vol-tput") })
	return target
}

// plainDisk mounts an ext4 filesystem made as a volume's is, on a loop
// device (direct I/O on) over a sparse file of size bytes in base: the
// LVM bench's disk, of the same kind as its volume group's.
func plainDisk(b *testing.B, base string, size int64) string {
	file := filepath.Join(base, "disk.img")
	f, err := os.Create(file)
	if err != nil {
		b.Fatal(err)
	}
	if err := f.Truncate(size); err != nil {
		b.Fatal(err)
	}
	f.Close()
	dev := strings.TrimSpace(mustRun(b, "losetup", "--find", "--show", "--direct-io=on", file))
	b.Cleanup(func() { _, _ = exec.Command("losetup", "-d", dev).CombinedOutput() })
	if err := mkfs(context.Background(), host.ExecRunner{}, dev); err != nil {
		b.Fatal(err)
	}
	mnt := filepath.Join(base, "disk")
	if err := os.MkdirAll(mnt, 0o755); err != nil {
		b.Fatal(err)
	}
	mustRun(b, "mount", "-t", "ext4", dev, mnt)
	b.Cleanup(func() { _, _ = exec.Command("umount", mnt).CombinedOutput() })
	return mnt
}

// testPVFile is the backing file of test volume group vg's loop device.
func testPVFile(b *testing.B, vg string) string {
	out, err := os.ReadFile("/sys/block/" + filepath.Base(testPV[vg]) + "/loop/backing_file")
	if err != nil {
		b.Fatal(err)
	}
	return strings.TrimSpace(string(out))
}

// dropPages drops file's pages from the node's page cache.
func dropPages(b *testing.B, file string) {
	f, err := os.Open(file)
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	if err := unix.Fadvise(int(f.Fd()), 0, 0, unix.FADV_DONTNEED); err != nil {
		b.Fatal(err)
	}
}

// volumeThroughput is one BenchmarkVolumeThroughput: each op writes and
// reads inVolume and onDisk, the first alternating, the before funcs run
// (untimed) before each side's read.
func volumeThroughput(b *testing.B, inVolume string, beforeVolume func(), onDisk string, beforeDisk func()) {
	const size = 256 << 20
	buf := aligned(1<<20, 4096)
	for i := range buf {
		buf[i] = byte(i * 7)
	}
	var t [2][2]time.Duration // [volume, disk][write, read]
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		for j := range 2 {
			k := (i + j) % 2 // 0: the volume, 1: the disk
			p, before := onDisk, beforeDisk
			if k == 0 {
				p, before = inVolume, beforeVolume
			}
			w, r := sequential(b, p, buf, size, before)
			t[k][0] += w
			t[k][1] += r
		}
	}
	mbs := func(d time.Duration) float64 { return float64(size) * float64(b.N) / (1 << 20) / d.Seconds() }
	b.ReportMetric(mbs(t[0][0]), "volume-write-MB/s")
	b.ReportMetric(mbs(t[1][0]), "disk-write-MB/s")
	b.ReportMetric(mbs(t[0][1]), "volume-read-MB/s")
	b.ReportMetric(mbs(t[1][1]), "disk-read-MB/s")
}

// sequential writes size bytes to path in blocks of buf with O_DIRECT,
// fsyncs, runs beforeRead (untimed), reads them back the same way, and
// removes the file.
func sequential(b *testing.B, path string, buf []byte, size int, beforeRead func()) (write, read time.Duration) {
	b.Helper()
	start := time.Now()
	f, err := os.OpenFile(path, os.O_CREATE|os.O_TRUNC|os.O_WRONLY|unix.O_DIRECT, 0o600)
	if err != nil {
		b.Fatal(err)
	}
	for n := 0; n < size; n += len(buf) {
		if _, err := f.Write(buf); err != nil {
			b.Fatal(err)
		}
	}
	if err := f.Sync(); err != nil {
		b.Fatal(err)
	}
	f.Close()
	write = time.Since(start)
	b.StopTimer()
	beforeRead()
	b.StartTimer()
	start = time.Now()
	if f, err = os.OpenFile(path, os.O_RDONLY|unix.O_DIRECT, 0); err != nil {
		b.Fatal(err)
	}
	for n := 0; n < size; n += len(buf) {
		if _, err := f.Read(buf); err != nil {
			b.Fatal(err)
		}
	}
	f.Close()
	read = time.Since(start)
	if err := os.Remove(path); err != nil {
		b.Fatal(err)
	}
	return write, read
}

// aligned is a buffer of n bytes whose address is a multiple of align,
// as O_DIRECT wants.
func aligned(n, align int) []byte {
	raw := make([]byte, n+align)
	off := align - int(uintptr(unsafe.Pointer(&raw[0]))%uintptr(align))
	if off == align {
		off = 0
	}
	return raw[off : off+n]
}
