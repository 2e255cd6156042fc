package volume

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"sync"
)

// Create implements Store: the backend makes the volume's storage, its
// whole size promised (a preallocated image, or an LV's extents), with an
// empty ext4 filesystem in it.
func (s *Images) Create(ctx context.Context, id string, size int64) (Info, error) {
	if err := CheckID(id); err != nil {
		return Info{}, err
	}
	if err := CheckSize(size); err != nil {
		return Info{}, err
	}
	unlock := s.locks.lock(id)
	defer unlock()
	switch have, err := s.b.size(ctx, id); {
	case err == nil:
		want, err := s.b.rounded(ctx, size)
		if err != nil {
			return Info{}, fmt.Errorf("create volume %s: %w", id, err)
		}
		if have != want {
			return Info{}, fmt.Errorf("create volume %s: %w (%d bytes, asked %d)", id, ErrExists, have, size)
		}
		return s.stat(ctx, id)
	case !errors.Is(err, ErrNotFound):
		return Info{}, fmt.Errorf("create volume %s: %w", id, err)
	}
	free, err := s.b.free(ctx)
	if err != nil {
		return Info{}, fmt.Errorf("create volume %s: %w", id, err)
	}
	// What the backend takes: an LV whole extents.
	want, err := s.b.rounded(ctx, size)
	if err != nil {
		return Info{}, fmt.Errorf("create volume %s: %w", id, err)
	}
	if want > free {
		return Info{}, fmt.Errorf("create volume %s: %w: %d bytes asked, %d free", id, ErrNoSpace, size, free)
	}
	if err := s.b.make(ctx, id, size); err != nil {
		return Info{}, fmt.Errorf("create volume %s: %w", id, err)
	}
	s.cfg.Log.Info("volume created", "volume", id, "size", size)
	return s.stat(ctx, id)
}

// Grow implements Store: the storage is extended, then the filesystem:
// online through the mounted device when mounted (the device told the
// new capacity first), offline after a forced e2fsck otherwise, as
// resize2fs requires.
func (s *Images) Grow(ctx context.Context, id string, size int64) (Info, error) {
	if err := CheckID(id); err != nil {
		return Info{}, err
	}
	if err := CheckSize(size); err != nil {
		return Info{}, err
	}
	unlock := s.locks.lock(id)
	defer unlock()
	// A slice's guest has the filesystem mounted: the host resizing it
	// under the guest (e2fsck -f, resize2fs) would corrupt it.
	if err := s.refuseLent(id); err != nil {
		return Info{}, fmt.Errorf("grow volume %s: %w", id, err)
	}
	old, err := s.b.size(ctx, id)
	if err != nil {
		return Info{}, fmt.Errorf("grow volume %s: %w", id, err)
	}
	want, err := s.b.rounded(ctx, size)
	if err != nil {
		return Info{}, fmt.Errorf("grow volume %s: %w", id, err)
	}
	switch {
	case want < old:
		return Info{}, fmt.Errorf("grow volume %s: %w: %d bytes now, asked %d", id, ErrShrink, old, size)
	case want == old:
		return s.stat(ctx, id)
	}
	free, err := s.b.free(ctx)
	if err != nil {
		return Info{}, fmt.Errorf("grow volume %s: %w", id, err)
	}
	if more := want - old; more > free {
		return Info{}, fmt.Errorf("grow volume %s: %w: %d more bytes asked, %d free", id, ErrNoSpace, more, free)
	}
	if err := s.b.extend(ctx, id, old, size); err != nil {
		return Info{}, fmt.Errorf("grow volume %s: %w", id, err)
	}
	dev, _, err := s.mounted(id)
	if err != nil {
		return Info{}, fmt.Errorf("grow volume %s: %w", id, err)
	}
	if dev != "" {
		// Online: the device learns its new capacity, then the mounted
		// filesystem grows. Where the kernel refuses (resize2fs needs
		// CAP_SYS_RESOURCE for the ioctl), the storage has its size and
		// Mount grows the filesystem the next time.
		err := s.b.refresh(ctx, dev)
		if err == nil {
			_, err = s.cfg.Runner.Run(ctx, "resize2fs", dev)
		}
		if err != nil {
			s.cfg.Log.Warn("volume grown offline at next mount: online resize failed", "volume", id, "err", err)
		}
	} else if err := s.growFS(ctx, id); err != nil {
		return Info{}, fmt.Errorf("grow volume %s: %w", id, err)
	}
	s.cfg.Log.Info("volume grown", "volume", id, "from", old, "size", size)
	return s.stat(ctx, id)
}

// mounted is the device of volume id that is mounted, and where; "" when
// none is.
func (s *Images) mounted(id string) (dev, point string, err error) {
	devs, err := s.b.devices(id)
	if err != nil {
		return "", "", err
	}
	for _, d := range devs {
		points, err := mountsOf(d)
		if err != nil {
			return "", "", err
		}
		if len(points) > 0 {
			return d, points[0], nil
		}
	}
	return "", "", nil
}

// growFS grows the unmounted filesystem of volume id to the volume's
// size, when it is smaller: after a forced check, as resize2fs(8)
// requires.
func (s *Images) growFS(ctx context.Context, id string) error {
	img := s.image(id)
	sb, err := readSuperblock(img)
	if err != nil {
		return err
	}
	size, err := s.b.size(ctx, id)
	if err != nil {
		return err
	}
	if sb.size >= size {
		return nil
	}
	if err := s.check(ctx, img, true); err != nil && !errors.Is(err, errRepaired) {
		return err
	}
	_, err = s.cfg.Runner.Run(ctx, "resize2fs", img)
	return err
}

// Delete implements Store: the backend removes the volume and gives its
// blocks back, discarded; devices left on it by a crash are let go first.
func (s *Images) Delete(ctx context.Context, id string) error {
	if err := CheckID(id); err != nil {
		return err
	}
	unlock := s.locks.lock(id)
	defer unlock()
	if err := s.refuseLent(id); err != nil { // a guest has it (lend.go)
		return fmt.Errorf("delete volume %s: %w", id, err)
	}
	if err := s.detachStale(ctx, id); err != nil {
		return fmt.Errorf("delete volume %s: %w", id, err)
	}
	if err := s.b.remove(ctx, id); err != nil {
		return fmt.Errorf("delete volume %s: %w", id, err)
	}
	if err := os.Remove(s.guestMarker(id)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("delete volume %s: %w", id, err)
	}
	s.cfg.Log.Info("volume deleted", "volume", id)
	return nil
}

// Stat implements Store.
func (s *Images) Stat(ctx context.Context, id string) (Info, error) {
	if err := CheckID(id); err != nil {
		return Info{}, err
	}
	return s.stat(ctx, id)
}

func (s *Images) stat(ctx context.Context, id string) (Info, error) {
	size, err := s.b.size(ctx, id)
	if err != nil {
		return Info{}, fmt.Errorf("stat volume %s: %w", id, err)
	}
	info := Info{ID: id, Size: size}
	devs, err := s.b.devices(id)
	if err != nil {
		return info, fmt.Errorf("stat volume %s: %w", id, err)
	}
	// A mounted filesystem's current superblock is its device's.
	sbOf := s.image(id)
	if len(devs) > 0 {
		sbOf = devs[0]
	}
	sb, err := readSuperblock(sbOf)
	if err != nil {
		return info, fmt.Errorf("stat volume %s: %w", id, err)
	}
	info.FSSize = sb.size
	_, info.MountPoint, err = s.mounted(id)
	if err != nil {
		return info, fmt.Errorf("stat volume %s: %w", id, err)
	}
	if info.MountPoint != "" {
		if used, _, err := fsSpace(info.MountPoint); err == nil {
			info.Used = used
		}
	}
	return info, nil
}

// Free implements Store.
func (s *Images) Free(ctx context.Context) (int64, error) { return s.b.free(ctx) }

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
func (s *Images) List(ctx context.Context) ([]Info, error) {
	ids, err := s.b.ids(ctx)
	if err != nil {
		return nil, fmt.Errorf("list volumes: %w", err)
	}
	var out []Info
	for _, id := range ids {
		info, err := s.stat(ctx, id)
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
