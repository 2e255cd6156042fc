package volume

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
)

const (
	userA, groupA = 61701, 61701
	userB, groupB = 61702, 61702
)

// TestFilesSurviveRemountAndANewUserWritesThem: what one renter wrote is
// there after unmount and mount for the next, whose uid differs, and the
// next can write the old files and new ones.
func TestFilesSurviveRemountAndANewUserWritesThem(t *testing.T) {
	eachBackend(t, func(t *testing.T, s *Images, base string) {
		ctx := context.Background()
		if _, err := s.Create(ctx, "vol-a", 32*MiB); err != nil {
			t.Fatal(err)
		}
		target := filepath.Join(base, "data", "a")
		info, err := s.Mount(ctx, "vol-a", target, userA, groupA)
		if err != nil {
			t.Fatal(err)
		}
		if info.MountPoint != target || info.Size != 32*MiB {
			t.Fatalf("mount info %+v; want at %s, size %d", info, target, 32*MiB)
		}
		if opts := mountOptions(t, target); !strings.Contains(opts, "nodev") || !strings.Contains(opts, "nosuid") {
			t.Fatalf("mount options %q; want nodev and nosuid", opts)
		}
		mustRunAs(t, userA, groupA, "cd "+target+" && mkdir -p ckpt && echo weights > ckpt/w && chmod 600 ckpt/w && ln -s ckpt/w link")
		if err := s.Unmount(ctx, "vol-a"); err != nil {
			t.Fatal(err)
		}
		if isMountPoint(t, target) {
			t.Fatalf("%s still mounted after Unmount", target)
		}
		if _, err := os.Stat(target); !errors.Is(err, os.ErrNotExist) {
			t.Fatalf("mount point after Unmount: %v; want it removed", err)
		}
		if loops, _ := loopsOf(s.image("vol-a")); len(loops) != 0 {
			t.Fatalf("loop devices after Unmount: %v; want none", loops)
		}

		info, err = s.Mount(ctx, "vol-a", target, userB, groupB)
		if err != nil {
			t.Fatal(err)
		}
		if info.Reowned != 3 {
			t.Errorf("reowned %d files; want 3 (ckpt, ckpt/w, link)", info.Reowned)
		}
		if got := mustRunAs(t, userB, groupB, "cat "+target+"/ckpt/w"); got != "weights\n" {
			t.Fatalf("file read by the new user = %q; want %q", got, "weights\n")
		}
		mustRunAs(t, userB, groupB, "cd "+target+" && echo more >> ckpt/w && echo new > ckpt/n")
		for _, p := range []string{target, target + "/ckpt", target + "/ckpt/w", target + "/link"} {
			if got := owner(t, p); got != userB {
				t.Errorf("owner of %s = %d; want %d", p, got, userB)
			}
		}
		if got := owner(t, target+"/lost+found"); got != 0 {
			t.Errorf("owner of lost+found = %d; want root's", got)
		}
		// The old renter's uid has nothing left on the volume.
		if out, err := runAs(t, userA, groupA, "ls "+target); err == nil {
			t.Fatalf("the previous uid lists the volume: %s", out)
		}
		// Mounting where it is is a retry; elsewhere it is refused.
		if _, err := s.Mount(ctx, "vol-a", target, userB, groupB); err != nil {
			t.Fatalf("mount again at the same place: %v", err)
		}
		if _, err := s.Mount(ctx, "vol-a", filepath.Join(base, "data", "b"), userA, groupA); !errors.Is(err, ErrMounted) {
			t.Fatalf("mount at a second place: %v; want ErrMounted", err)
		}
	})
}

// TestWritePastTheSizeIsENOSPC: the image is the hard limit; the
// volume's writes never take more of the node's disk than its size.
func TestWritePastTheSizeIsENOSPC(t *testing.T) {
	eachBackend(t, func(t *testing.T, s *Images, base string) {
		ctx := context.Background()
		const size = 32 * MiB
		if _, err := s.Create(ctx, "vol-full", size); err != nil {
			t.Fatal(err)
		}
		target := filepath.Join(base, "full")
		if _, err := s.Mount(ctx, "vol-full", target, userA, groupA); err != nil {
			t.Fatal(err)
		}
		freeBefore, err := s.Free(ctx)
		if err != nil {
			t.Fatal(err)
		}
		out, err := runAs(t, userA, groupA, "dd if=/dev/zero of="+target+"/big bs=1M count=64 conv=fsync")
		if err == nil || !strings.Contains(out, "No space left on device") {
			t.Fatalf("writing 64 MiB into 32: err %v, output %q; want No space left on device", err, out)
		}
		if s.cfg.VolumeGroup == "" {
			var st syscall.Stat_t
			if err := syscall.Stat(s.image("vol-full"), &st); err != nil {
				t.Fatal(err)
			}
			// The node's filesystem adds a block or so of extent tree.
			if st.Size != size || st.Blocks*512 > size+MiB {
				t.Fatalf("image: %d bytes, %d allocated; want %d and no more allocated", st.Size, st.Blocks*512, size)
			}
		} else if free, err := s.Free(ctx); err != nil || free != freeBefore {
			// The group's other extents are untouched by the full volume.
			t.Fatalf("volume group free %d, %v after filling the volume; want %d as before", free, err, freeBefore)
		}
		info, err := s.Stat(ctx, "vol-full")
		if err != nil {
			t.Fatal(err)
		}
		if info.Used > size || info.Used < size/2 {
			t.Fatalf("used %d of %d after filling it", info.Used, size)
		}
	})
}

// TestDeleteLeavesNoLoopDeviceMountOrFile, and refuses while mounted.
func TestDeleteLeavesNoLoopDeviceMountOrFile(t *testing.T) {
	eachBackend(t, func(t *testing.T, s *Images, base string) {
		ctx := context.Background()
		if _, err := s.Create(ctx, "vol-del", 16*MiB); err != nil {
			t.Fatal(err)
		}
		target := filepath.Join(base, "del")
		if _, err := s.Mount(ctx, "vol-del", target, userA, groupA); err != nil {
			t.Fatal(err)
		}
		img := s.image("vol-del")
		if err := s.Delete(ctx, "vol-del"); !errors.Is(err, ErrMounted) {
			t.Fatalf("delete while mounted: %v; want ErrMounted", err)
		}
		if _, err := os.Stat(img); err != nil {
			t.Fatalf("refused delete removed the image: %v", err)
		}
		mustRunAs(t, userA, groupA, "head -c 4194304 /dev/urandom > "+target+"/data && sync")
		if err := s.Unmount(ctx, "vol-del"); err != nil {
			t.Fatal(err)
		}
		var extents [2]int64
		if s.cfg.VolumeGroup != "" {
			extents = lvExtents(t, s.cfg.VolumeGroup, lvPrefix+"vol-del")
			if n := nonZero(t, testPV[s.cfg.VolumeGroup], extents); n == 0 {
				t.Fatal("the volume's extents are all zero before delete: the check after proves nothing")
			}
		}
		if err := s.Delete(ctx, "vol-del"); err != nil {
			t.Fatal(err)
		}
		if _, err := os.Stat(img); !errors.Is(err, os.ErrNotExist) {
			t.Fatalf("image after delete: %v; want gone", err)
		}
		if s.cfg.VolumeGroup != "" {
			if ids, err := s.b.ids(ctx); err != nil || len(ids) != 0 {
				t.Fatalf("logical volumes after delete: %v, %v; want none", ids, err)
			}
			// The extents the volume had read back as zeros from the
			// group's disk: the next volume on them gets nothing of it.
			if n := nonZero(t, testPV[s.cfg.VolumeGroup], extents); n != 0 {
				t.Fatalf("%d bytes of the deleted volume's extents are not zero", n)
			}
		}
		if loops, _ := loopsOf(img); len(loops) != 0 || isMountPoint(t, target) {
			t.Fatalf("after delete: loops %v, mounted %v; want neither", loops, isMountPoint(t, target))
		}
		if err := s.Delete(ctx, "vol-del"); err != nil {
			t.Fatalf("delete again (a retried task): %v", err)
		}
		if _, err := s.Stat(ctx, "vol-del"); !errors.Is(err, ErrNotFound) {
			t.Fatalf("stat after delete: %v; want ErrNotFound", err)
		}
	})
}

// TestMountAfterAnUncleanStopReplaysTheJournal: an image copied while
// mounted is what a crash leaves (its journal needs recovery); Mount
// checks it first and says so, and the data written before is there.
func TestMountAfterAnUncleanStopReplaysTheJournal(t *testing.T) {
	eachBackend(t, func(t *testing.T, s *Images, base string) {
		ctx := context.Background()
		if _, err := s.Create(ctx, "vol-live", 32*MiB); err != nil {
			t.Fatal(err)
		}
		live := filepath.Join(base, "live")
		if _, err := s.Mount(ctx, "vol-live", live, userA, groupA); err != nil {
			t.Fatal(err)
		}
		mustRunAs(t, userA, groupA, "echo before-crash > "+live+"/f && sync")
		b, err := os.ReadFile(s.image("vol-live"))
		if err != nil {
			t.Fatal(err)
		}
		if s.cfg.VolumeGroup != "" {
			// An LV's copy goes into an LV of its own.
			if _, err := s.Create(ctx, "vol-crash", 32*MiB); err != nil {
				t.Fatal(err)
			}
		}
		if err := overwrite(s.image("vol-crash"), b); err != nil {
			t.Fatal(err)
		}
		out, err := s.cfg.Runner.Run(ctx, "dumpe2fs", "-h", s.image("vol-crash"))
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(out), "needs_recovery") {
			t.Fatalf("the crash image does not need recovery; the test proves nothing:\n%s", out)
		}
		info, err := s.Mount(ctx, "vol-crash", filepath.Join(base, "crash"), userB, groupB)
		if err != nil {
			t.Fatal(err)
		}
		if !info.Repaired {
			t.Errorf("mount of a crashed volume: Repaired false; want the check to report its recovery")
		}
		if got := mustRunAs(t, userB, groupB, "cat "+base+"/crash/f"); got != "before-crash\n" {
			t.Fatalf("after recovery f = %q", got)
		}
		info, err = s.Stat(ctx, "vol-live")
		if err != nil || info.Repaired {
			t.Fatalf("stat %+v %v", info, err)
		}
	})
}

// TestGrowOnlineAndOffline: the filesystem follows the image, mounted or
// not; smaller is refused and changes nothing.
func TestGrowOnlineAndOffline(t *testing.T) {
	eachBackend(t, func(t *testing.T, s *Images, base string) {
		ctx := context.Background()
		if _, err := s.Create(ctx, "vol-g", 32*MiB); err != nil {
			t.Fatal(err)
		}
		target := filepath.Join(base, "g")
		if _, err := s.Mount(ctx, "vol-g", target, userA, groupA); err != nil {
			t.Fatal(err)
		}
		mustRunAs(t, userA, groupA, "echo keep > "+target+"/k")
		fsSize := func() int64 {
			var st syscall.Statfs_t
			if err := syscall.Statfs(target, &st); err != nil {
				t.Fatal(err)
			}
			return int64(st.Blocks) * st.Bsize
		}
		before := fsSize()
		info, err := s.Grow(ctx, "vol-g", 64*MiB)
		if err != nil {
			t.Fatal(err)
		}
		// Online growth needs CAP_SYS_RESOURCE; without it the filesystem
		// grows at the next mount, and Info says which happened.
		online := info.FSSize == 64*MiB
		if after := fsSize(); online != (after >= before+24*MiB) {
			t.Fatalf("online grow: filesystem %d -> %d bytes, FSSize %d; want them to agree", before, after, info.FSSize)
		}
		t.Logf("online growth applied: %v", online)
		if _, err := s.Grow(ctx, "vol-g", 48*MiB); !errors.Is(err, ErrShrink) {
			t.Fatalf("grow to less: %v; want ErrShrink", err)
		}
		if err := s.Unmount(ctx, "vol-g"); err != nil {
			t.Fatal(err)
		}
		info, err = s.Grow(ctx, "vol-g", 96*MiB)
		if err != nil {
			t.Fatal(err)
		}
		if info.Size != 96*MiB || info.FSSize != 96*MiB {
			t.Fatalf("after offline grow: image %d, filesystem %d; want both %d", info.Size, info.FSSize, 96*MiB)
		}
		if _, err := s.Mount(ctx, "vol-g", target, userB, groupB); err != nil {
			t.Fatal(err)
		}
		if got := fsSize(); got < before+56*MiB {
			t.Fatalf("after grows: filesystem has %d bytes for data, %d before; want 64 MiB more", got, before)
		}
		if got := mustRunAs(t, userB, groupB, "cat "+target+"/k"); got != "keep\n" {
			t.Fatalf("file after grows = %q", got)
		}
	})
}

// TestBadRequestsChangeNothing: each refusal names its reason and leaves
// no file behind.
func TestBadRequestsChangeNothing(t *testing.T) {
	eachBackend(t, func(t *testing.T, s *Images, base string) {
		ctx := context.Background()
		free, err := s.Free(ctx)
		if err != nil {
			t.Fatal(err)
		}
		tooBig := (free/MiB + 1024) * MiB
		for _, tc := range []struct {
			name string
			id   string
			size int64
			want error
		}{
			{"zero", "vol-x", 0, ErrInvalid},
			{"negative", "vol-x", -MiB, ErrInvalid},
			{"below minimum", "vol-x", MiB, ErrInvalid},
			{"not whole MiB", "vol-x", 16*MiB + 512, ErrInvalid},
			{"above maximum", "vol-x", MaxSize + MiB, ErrInvalid},
			{"over free space", "vol-x", tooBig, ErrNoSpace},
			{"path in id", "../x", 16 * MiB, ErrInvalid},
			{"empty id", "", 16 * MiB, ErrInvalid},
			{"capitals", "Vol", 16 * MiB, ErrInvalid},
		} {
			t.Run(tc.name, func(t *testing.T) {
				if _, err := s.Create(ctx, tc.id, tc.size); !errors.Is(err, tc.want) {
					t.Fatalf("create %q %d: %v; want %v", tc.id, tc.size, err, tc.want)
				}
				ents, _ := os.ReadDir(s.cfg.Dir)
				ents = slices.DeleteFunc(ents, func(e os.DirEntry) bool { return e.Name() == backendFile }) // the store's, from New
				if len(ents) != 0 {
					t.Fatalf("refused create left %v", ents)
				}
				if ids, err := s.b.ids(ctx); err != nil || len(ids) != 0 {
					t.Fatalf("refused create left volumes %v, %v", ids, err)
				}
			})
		}
		if _, err := s.Create(ctx, "vol-ok", 16*MiB); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Create(ctx, "vol-ok", 16*MiB); err != nil {
			t.Fatalf("create again with the same size (a retry): %v", err)
		}
		if _, err := s.Create(ctx, "vol-ok", 32*MiB); !errors.Is(err, ErrExists) {
			t.Fatalf("create again with another size: %v; want ErrExists", err)
		}
		for _, tc := range []struct {
			name, target string
			uid          int
		}{
			{"relative target", "data/x", userA},
			{"unclean target", base + "/a/../b", userA},
			{"root target", "/", userA},
			{"root owner", base + "/r", 0},
		} {
			if _, err := s.Mount(ctx, "vol-ok", tc.target, tc.uid, tc.uid); !errors.Is(err, ErrInvalid) {
				t.Errorf("%s: mount: %v; want ErrInvalid", tc.name, err)
			}
		}
		if _, err := s.Mount(ctx, "vol-none", base+"/n", userA, groupA); !errors.Is(err, ErrNotFound) {
			t.Errorf("mount of a missing volume: %v; want ErrNotFound", err)
		}
		if _, err := s.Grow(ctx, "vol-ok", tooBig); !errors.Is(err, ErrNoSpace) {
			t.Errorf("grow past free space: %v; want ErrNoSpace", err)
		}
		if info, _ := s.Stat(ctx, "vol-ok"); info.Size != 16*MiB {
			t.Errorf("refused grow changed the size to %d", info.Size)
		}
	})
}
