package volume

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strings"
	"sync"
)

// Create implements Store: the image is preallocated (fallocate), so the
// node's disk has promised the volume its whole size and writes inside
// it can never fill the node's disk; mkfs.ext4 with no reserved blocks
// (-m 0: the renter gets the whole size) and no discard (it would punch
// the preallocation out again).
func (s *Images) Create(ctx context.Context, id string, size int64) (Info, error) {
	if err := CheckID(id); err != nil {
		return Info{}, err
	}
	if err := CheckSize(size); err != nil {
		return Info{}, err
	}
	unlock := s.locks.lock(id)
	defer unlock()
	img := s.image(id)
	if fi, err := os.Stat(img); err == nil {
		if fi.Size() != size {
			return Info{}, fmt.Errorf("create volume %s: %w (%d bytes, asked %d)", id, ErrExists, fi.Size(), size)
		}
		return s.stat(id)
	}
	free, err := s.Free(ctx)
	if err != nil {
		return Info{}, fmt.Errorf("create volume %s: %w", id, err)
	}
	if size > free {
		return Info{}, fmt.Errorf("create volume %s: %w: %d bytes asked, %d free", id, ErrNoSpace, size, free)
	}
	// The image is made under a temporary name and renamed when its
	// filesystem is complete: a crash leaves no half-made volume.
	tmp := img + ".new"
	if err := s.makeImage(ctx, tmp, size); err != nil {
		_ = os.Remove(tmp)
		return Info{}, fmt.Errorf("create volume %s: %w", id, err)
	}
	if err := os.Rename(tmp, img); err != nil {
		_ = os.Remove(tmp)
		return Info{}, fmt.Errorf("create volume %s: %w", id, err)
	}
	s.cfg.Log.Info("volume created", "volume", id, "size", size)
	return s.stat(id)
}

// makeImage writes a preallocated file of size bytes at path with an
// empty ext4 filesystem in it.
func (s *Images) makeImage(ctx context.Context, path string, size int64) error {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return err
	}
	err = allocate(f, 0, size)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("preallocate %d bytes: %w", size, err)
	}
	// 4 KiB blocks whatever the size: mke2fs.conf's "small" and "floppy"
	// types give a filesystem under 512 MiB 1 KiB blocks, which it keeps
	// when grown, and every 1 MiB write becomes 1,024 blocks to allocate
	// and map (mke2fs(8) -b, mke2fs.conf(5)).
	_, err = s.cfg.Runner.Run(ctx, "mkfs.ext4", "-q", "-F", "-m", "0", "-b", "4096",
		"-E", "nodiscard,lazy_itable_init=1,lazy_journal_init=1", path)
	return err
}

// Grow implements Store: the image is extended (and preallocated), then
// the filesystem: online through the loop device when mounted (the loop
// device told the new capacity first), offline after a forced e2fsck
// otherwise, as resize2fs requires.
func (s *Images) Grow(ctx context.Context, id string, size int64) (Info, error) {
	if err := CheckID(id); err != nil {
		return Info{}, err
	}
	if err := CheckSize(size); err != nil {
		return Info{}, err
	}
	unlock := s.locks.lock(id)
	defer unlock()
	img := s.image(id)
	fi, err := os.Stat(img)
	if err != nil {
		return Info{}, fmt.Errorf("grow volume %s: %w", id, notFound(err))
	}
	switch {
	case size < fi.Size():
		return Info{}, fmt.Errorf("grow volume %s: %w: %d bytes now, asked %d", id, ErrShrink, fi.Size(), size)
	case size == fi.Size():
		return s.stat(id)
	}
	free, err := s.Free(ctx)
	if err != nil {
		return Info{}, fmt.Errorf("grow volume %s: %w", id, err)
	}
	if more := size - fi.Size(); more > free {
		return Info{}, fmt.Errorf("grow volume %s: %w: %d more bytes asked, %d free", id, ErrNoSpace, more, free)
	}
	if err := extend(img, fi.Size(), size); err != nil {
		return Info{}, fmt.Errorf("grow volume %s: %w", id, err)
	}
	loops, err := loopsOf(img)
	if err != nil {
		return Info{}, fmt.Errorf("grow volume %s: %w", id, err)
	}
	if len(loops) > 0 {
		// Online: the loop device learns its new capacity, then the
		// mounted filesystem grows. Where the kernel refuses (resize2fs
		// needs CAP_SYS_RESOURCE for the ioctl), the image has its size
		// and Mount grows the filesystem the next time.
		dev := loops[0]
		_, err := s.cfg.Runner.Run(ctx, "losetup", "--set-capacity", dev)
		if err == nil {
			_, err = s.cfg.Runner.Run(ctx, "resize2fs", dev)
		}
		if err != nil {
			s.cfg.Log.Warn("volume grown offline at next mount: online resize failed", "volume", id, "err", err)
		}
	} else if err := s.growFS(ctx, img); err != nil {
		return Info{}, fmt.Errorf("grow volume %s: %w", id, err)
	}
	s.cfg.Log.Info("volume grown", "volume", id, "from", fi.Size(), "size", size)
	return s.stat(id)
}

// growFS grows the unmounted filesystem of img to the image's size,
// when it is smaller: after a forced check, as resize2fs(8) requires.
func (s *Images) growFS(ctx context.Context, img string) error {
	sb, err := readSuperblock(img)
	if err != nil {
		return err
	}
	fi, err := os.Stat(img)
	if err != nil {
		return err
	}
	if sb.size >= fi.Size() {
		return nil
	}
	if err := s.check(ctx, img, true); err != nil && !errors.Is(err, errRepaired) {
		return err
	}
	_, err = s.cfg.Runner.Run(ctx, "resize2fs", img)
	return err
}

// extend preallocates path from old to size bytes.
func extend(path string, old, size int64) error {
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return err
	}
	err = allocate(f, old, size-old)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("preallocate to %d bytes: %w", size, err)
	}
	return nil
}

// Delete implements Store: the image is removed, which gives its blocks
// back to the node's filesystem (and, through it, discards them on the
// disk where that filesystem discards); loop devices left on it by a
// crash are detached first.
func (s *Images) Delete(ctx context.Context, id string) error {
	if err := CheckID(id); err != nil {
		return err
	}
	unlock := s.locks.lock(id)
	defer unlock()
	if err := s.refuseLent(id); err != nil { // a guest has it (lend.go)
		return fmt.Errorf("delete volume %s: %w", id, err)
	}
	img := s.image(id)
	loops, err := loopsOf(img)
	if err != nil {
		return fmt.Errorf("delete volume %s: %w", id, err)
	}
	for _, dev := range loops {
		points, err := mountsOf(dev)
		if err != nil {
			return fmt.Errorf("delete volume %s: %w", id, err)
		}
		if len(points) > 0 {
			return fmt.Errorf("delete volume %s: %w at %s", id, ErrMounted, points[0])
		}
		if _, err := s.cfg.Runner.Run(ctx, "losetup", "-d", dev); err != nil {
			return fmt.Errorf("delete volume %s: %w", id, err)
		}
	}
	for _, p := range []string{img + ".new", s.guestMarker(id), img} {
		if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("delete volume %s: %w", id, err)
		}
	}
	s.cfg.Log.Info("volume deleted", "volume", id)
	return nil
}

// Stat implements Store.
func (s *Images) Stat(_ context.Context, id string) (Info, error) {
	if err := CheckID(id); err != nil {
		return Info{}, err
	}
	return s.stat(id)
}

func (s *Images) stat(id string) (Info, error) {
	img := s.image(id)
	fi, err := os.Stat(img)
	if err != nil {
		return Info{}, fmt.Errorf("stat volume %s: %w", id, notFound(err))
	}
	info := Info{ID: id, Size: fi.Size()}
	loops, err := loopsOf(img)
	if err != nil {
		return info, fmt.Errorf("stat volume %s: %w", id, err)
	}
	// A mounted filesystem's current superblock is the loop device's.
	sbOf := img
	if len(loops) > 0 {
		sbOf = loops[0]
	}
	sb, err := readSuperblock(sbOf)
	if err != nil {
		return info, fmt.Errorf("stat volume %s: %w", id, err)
	}
	info.FSSize = sb.size
	for _, dev := range loops {
		points, err := mountsOf(dev)
		if err != nil {
			return info, fmt.Errorf("stat volume %s: %w", id, err)
		}
		if len(points) > 0 {
			info.MountPoint = points[0]
			if used, _, err := fsSpace(info.MountPoint); err == nil {
				info.Used = used
			}
			break
		}
	}
	return info, nil
}

// Free implements Store: the room left on the filesystem of Dir for
// unprivileged writers, so volumes never take the reserve root keeps.
func (s *Images) Free(context.Context) (int64, error) {
	_, avail, err := fsSpace(s.cfg.Dir)
	if err != nil {
		return 0, fmt.Errorf("free space of %s: %w", s.cfg.Dir, err)
	}
	return avail, nil
}

func notFound(err error) error {
	if errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("%w: %w", ErrNotFound, err)
	}
	return err
}

// keyedMutex is one mutex per key, made on first use.
type keyedMutex struct {
	// mu protects m.
	mu sync.Mutex
	m  map[string]*sync.Mutex
}

func (k *keyedMutex) lock(key string) func() {
	k.mu.Lock()
	if k.m == nil {
		k.m = map[string]*sync.Mutex{}
	}
	l, ok := k.m[key]
	if !ok {
		l = &sync.Mutex{}
		k.m[key] = l
	}
	k.mu.Unlock()
	l.Lock()
	return l.Unlock
}

// List implements Store.
func (s *Images) List(context.Context) ([]Info, error) {
	ents, err := os.ReadDir(s.cfg.Dir)
	if err != nil {
		return nil, fmt.Errorf("list volumes: %w", err)
	}
	var out []Info
	for _, e := range ents {
		id, ok := strings.CutSuffix(e.Name(), ".img")
		if !ok || CheckID(id) != nil {
			continue // a .new being made, or not ours
		}
		info, err := s.stat(id)
		if errors.Is(err, ErrNotFound) {
			continue // deleted meanwhile
		}
		if err != nil {
			return nil, err
		}
		out = append(out, info)
	}
	return out, nil
}
