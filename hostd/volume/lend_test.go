package volume

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"
)

// TestLendLocksTheVolume: a volume lent to a slice VM is never mounted on
// the host, deleted, or lent to a second allocation until it is returned
// (docs/decisions/0030-volumes-in-slices.md); a volume mounted on the
// host is not lent. The lock is a file, so it outlives a restart of
// hostd (a new Images on the same directory).
func TestLendLocksTheVolume(t *testing.T) {
	eachBackend(t, func(t *testing.T, s *Images, base string) {
		ctx := t.Context()
		const id, other = "vol-lend1", "vol-lend2"
		for _, v := range []string{id, other} {
			if _, err := s.Create(ctx, v, MinSize); err != nil {
				t.Fatal(err)
			}
		}
		img, err := s.Lend(ctx, id, "a-one")
		if err != nil {
			t.Fatalf("Lend: %v", err)
		}
		if img != s.image(id) {
			t.Errorf("Lend gave %s; want %s", img, s.image(id))
		}
		if fi, err := os.Stat(s.cfg.Dir); err != nil || fi.Mode().Perm() != 0o711 {
			t.Errorf("volume directory mode = %v, %v; want 0711 (QEMU's user traverses it)", fi.Mode(), err)
		}
		if again, err := s.Lend(ctx, id, "a-one"); err != nil || again != img {
			t.Errorf("a retried Lend = %q, %v; want the image", again, err)
		}

		restarted, err := New(s.cfg)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := restarted.Mount(ctx, id, filepath.Join(base, "mnt"), 1234, 1234); !errors.Is(err, ErrLent) {
			t.Errorf("Mount of a lent volume = %v; want ErrLent", err)
		}
		if err := restarted.Delete(ctx, id); !errors.Is(err, ErrLent) {
			t.Errorf("Delete of a lent volume = %v; want ErrLent", err)
		}
		if _, err := restarted.Grow(ctx, id, 2*MinSize); !errors.Is(err, ErrLent) {
			t.Errorf("Grow of a lent volume = %v; want ErrLent (the guest has its filesystem mounted)", err)
		}
		if _, err := restarted.Lend(ctx, id, "a-two"); !errors.Is(err, ErrLent) {
			t.Errorf("Lend to a second allocation = %v; want ErrLent", err)
		}
		if got, err := restarted.LentTo(ctx, "a-one"); err != nil || !slices.Equal(got, []string{id}) {
			t.Errorf("LentTo = %v, %v; want [%s]", got, err, id)
		}
		if err := restarted.Return(ctx, id, "a-two"); err != nil {
			t.Errorf("Return by an allocation that has not the volume = %v; want nil and no change", err)
		}
		if _, err := restarted.Mount(ctx, id, filepath.Join(base, "mnt"), 1234, 1234); !errors.Is(err, ErrLent) {
			t.Errorf("after another allocation's Return, Mount = %v; want ErrLent still", err)
		}
		if err := restarted.Return(ctx, id, "a-one"); err != nil {
			t.Fatalf("Return: %v", err)
		}
		if got, _ := restarted.LentTo(ctx, "a-one"); len(got) != 0 {
			t.Errorf("after Return LentTo = %v; want none", got)
		}
		if _, err := restarted.Mount(ctx, id, filepath.Join(base, "mnt"), 1234, 1234); err != nil {
			t.Fatalf("Mount after Return: %v", err)
		}
		if _, err := restarted.Lend(ctx, id, "a-two"); !errors.Is(err, ErrMounted) {
			t.Errorf("Lend of a volume mounted on the host = %v; want ErrMounted", err)
		}
		if err := restarted.Unmount(ctx, id); err != nil {
			t.Fatal(err)
		}
		if err := restarted.Delete(ctx, id); err != nil {
			t.Errorf("Delete after Return: %v", err)
		}
		if _, err := s.Lend(ctx, "vol-missing", "a-one"); !errors.Is(err, ErrNotFound) {
			t.Errorf("Lend of a missing volume = %v; want ErrNotFound", err)
		}
		for _, bad := range []string{"", "a/b", "a\nb"} {
			if _, err := s.Lend(ctx, other, bad); !errors.Is(err, ErrInvalid) {
				t.Errorf("Lend to allocation %q = %v; want ErrInvalid", bad, err)
			}
		}
	})
}

// TestReturnedVolumeIsCheckedInFull: a slice VM had the raw disk, so what
// it returns is the tenant's filesystem, superblock and "clean" flag
// included. The host's next mount checks it in full (e2fsck -f) before
// its kernel parses it: a wrong free-blocks count left under a clean flag
// — which e2fsck -p alone skips — is found and repaired. Later mounts go
// back to the quick check.
func TestReturnedVolumeIsCheckedInFull(t *testing.T) {
	eachBackend(t, func(t *testing.T, s *Images, base string) {
		ctx := t.Context()
		const id = "vol-guest1"
		if _, err := s.Create(ctx, id, MinSize); err != nil {
			t.Fatal(err)
		}
		img, err := s.Lend(ctx, id, "a-one")
		if err != nil {
			t.Fatal(err)
		}
		// What a guest (root in its VM, with the raw disk) can write: here a
		// superblock whose counts lie while its state says clean.
		if out, err := exec.Command("debugfs", "-w", "-R", "ssv free_blocks_count 7", img).CombinedOutput(); err != nil {
			t.Fatalf("debugfs: %v\n%s", err, out)
		}
		if err := s.Return(ctx, id, "a-one"); err != nil {
			t.Fatal(err)
		}
		mnt := filepath.Join(base, "mnt")
		info, err := s.Mount(ctx, id, mnt, 1234, 1234)
		if err != nil {
			t.Fatalf("Mount after the guest: %v", err)
		}
		if !info.Repaired {
			t.Error("the mount after a guest's loan did not find the lying superblock: no full check")
		}
		if err := s.Unmount(ctx, id); err != nil {
			t.Fatal(err)
		}
		info, err = s.Mount(ctx, id, mnt, 1234, 1234)
		if err != nil {
			t.Fatal(err)
		}
		if info.Repaired {
			t.Error("a second mount repaired something: the first full check did not fix it")
		}
		if err := s.Unmount(ctx, id); err != nil {
			t.Fatal(err)
		}
	})
}

// TestStoreKeepsItsBackend: a store started on another backend than the
// one holding the node's volumes is refused (it would report none of
// them, and controld would mark every one lost); an empty directory may
// change backend.
func TestStoreKeepsItsBackend(t *testing.T) {
	dir := t.TempDir()
	if _, err := New(Config{Dir: dir}); err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(filepath.Join(dir, backendFile)); err != nil || string(b) != "images\n" {
		t.Fatalf("backend record = %q, %v; want images", b, err)
	}
	if err := os.WriteFile(filepath.Join(dir, backendFile), []byte("lvm:vg0\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := New(Config{Dir: dir}); !errors.Is(err, ErrInvalid) {
		t.Fatalf("image store on a node whose volumes are in vg0 = %v; want ErrInvalid", err)
	}
	s := &Images{cfg: Config{Dir: dir, VolumeGroup: "vg0"}}
	if err := os.WriteFile(filepath.Join(dir, "vol-a.img"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, backendFile), []byte("images\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := s.keepBackend(); !errors.Is(err, ErrInvalid) {
		t.Fatalf("lvm store over image volumes = %v; want ErrInvalid", err)
	}
	if err := os.Remove(filepath.Join(dir, "vol-a.img")); err != nil {
		t.Fatal(err)
	}
	if err := s.keepBackend(); err != nil {
		t.Fatalf("lvm store over an empty image directory = %v; want it taken", err)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, backendFile)); string(b) != "lvm:vg0\n" {
		t.Fatalf("backend record = %q; want lvm:vg0", b)
	}
}
