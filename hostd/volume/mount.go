package volume

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/gpuaas/gpuaas/hostd/host"
)

// Mount implements Store. Mounting again where the volume is mounted is
// a retry and only re-owns; mounted elsewhere is ErrMounted (a volume is
// in one place at a time). The filesystem is mounted nodev,nosuid: a
// tenant's files never act as devices or set-uid programs on the node.
func (s *Images) Mount(ctx context.Context, id, target string, uid, gid int) (Info, error) {
	if err := CheckID(id); err != nil {
		return Info{}, err
	}
	if !filepath.IsAbs(target) || filepath.Clean(target) != target || target == "/" {
		return Info{}, fmt.Errorf("%w: mount target %q is not a clean absolute path", ErrInvalid, target)
	}
	if uid <= 0 || gid <= 0 {
		return Info{}, fmt.Errorf("%w: owner %d:%d (volumes are never root's)", ErrInvalid, uid, gid)
	}
	unlock := s.locks.lock(id)
	defer unlock()
	info, err := s.stat(ctx, id)
	if err != nil {
		return Info{}, fmt.Errorf("mount volume %s: %w", id, err)
	}
	if err := s.refuseLent(id); err != nil { // a guest has it (lend.go)
		return Info{}, fmt.Errorf("mount volume %s: %w", id, err)
	}
	switch info.MountPoint {
	case "":
	case target:
		n, err := reown(target, uid, gid)
		info.Reowned = n
		if err != nil {
			return info, fmt.Errorf("mount volume %s: %w", id, err)
		}
		return info, nil
	default:
		return Info{}, fmt.Errorf("mount volume %s at %s: %w at %s", id, target, ErrMounted, info.MountPoint)
	}
	img := s.image(id)
	if err := s.detachStale(ctx, id); err != nil {
		return Info{}, fmt.Errorf("mount volume %s: %w", id, err)
	}
	// e2fsck -p replays a journal with exit status 0, so the superblock
	// says whether the stop before was clean.
	sb, err := readSuperblock(img)
	if err != nil {
		return Info{}, fmt.Errorf("mount volume %s: %w", id, err)
	}
	// A filesystem a guest wrote is checked in full before the host's
	// kernel parses it (lend.go): the tenant made every byte of it.
	guest := s.guestWritten(id)
	err = s.check(ctx, img, guest)
	info.Repaired = sb.unclean || errors.Is(err, errRepaired)
	if err != nil && !errors.Is(err, errRepaired) {
		return Info{}, fmt.Errorf("mount volume %s: %w", id, err)
	}
	if guest {
		if err := os.Remove(s.guestMarker(id)); err != nil {
			return Info{}, fmt.Errorf("mount volume %s: %w", id, err)
		}
	}
	if err := s.growFS(ctx, id); err != nil {
		return Info{}, fmt.Errorf("mount volume %s: %w", id, err)
	}
	if info.FSSize < info.Size {
		info.FSSize = info.Size
	}
	if info.Repaired {
		s.cfg.Log.Warn("volume repaired before mount", "volume", id)
	}
	if err := makeMountPoint(target); err != nil {
		return Info{}, fmt.Errorf("mount volume %s: %w", id, err)
	}
	if err := s.mountDevice(ctx, id, target); err != nil { // attach.go
		return Info{}, fmt.Errorf("mount volume %s: %w", id, err)
	}
	info.MountPoint = target
	n, err := reown(target, uid, gid)
	info.Reowned = n
	if err != nil {
		return info, fmt.Errorf("mount volume %s: %w", id, errors.Join(err, s.unmount(ctx, id)))
	}
	s.cfg.Log.Info("volume mounted", "volume", id, "at", target, "uid", uid, "reowned", n)
	return info, nil
}

// makeMountPoint makes target a directory of root's (its parents too),
// refusing a symbolic link in its place.
func makeMountPoint(target string) error {
	if err := os.MkdirAll(target, 0o755); err != nil {
		return err
	}
	fi, err := os.Lstat(target)
	if err != nil {
		return err
	}
	if !fi.IsDir() {
		return fmt.Errorf("%w: mount target %s is not a directory", ErrInvalid, target)
	}
	return nil
}

// Unmount implements Store. It is not lazy: a process still using the
// volume makes it fail, so a volume is never left reachable by its last
// user once this returns nil. The empty mount point is removed.
func (s *Images) Unmount(ctx context.Context, id string) error {
	if err := CheckID(id); err != nil {
		return err
	}
	unlock := s.locks.lock(id)
	defer unlock()
	return s.unmount(ctx, id)
}

func (s *Images) unmount(ctx context.Context, id string) error {
	devs, err := s.b.devices(id)
	if err != nil {
		return fmt.Errorf("unmount volume %s: %w", id, err)
	}
	for _, dev := range devs {
		points, err := mountsOf(dev)
		if err != nil {
			return fmt.Errorf("unmount volume %s: %w", id, err)
		}
		for _, p := range points {
			if _, err := s.cfg.Runner.Run(ctx, "umount", p); err != nil {
				return fmt.Errorf("unmount volume %s: %w", id, err)
			}
			// Only an empty directory goes; what else is there stays.
			_ = os.Remove(p)
		}
	}
	if err := s.detachStale(ctx, id); err != nil {
		return fmt.Errorf("unmount volume %s: %w", id, err)
	}
	s.cfg.Log.Info("volume unmounted", "volume", id)
	return nil
}

// detachStale lets go of the devices of volume id, refusing when one is
// mounted (mount's own are let go when unmounted; loop devices found here
// are left by a crash).
func (s *Images) detachStale(ctx context.Context, id string) error {
	devs, err := s.b.devices(id)
	if err != nil {
		return err
	}
	for _, dev := range devs {
		points, err := mountsOf(dev)
		if err != nil {
			return err
		}
		if len(points) > 0 {
			return fmt.Errorf("%w: %s at %s", ErrMounted, dev, points[0])
		}
		if err := s.b.detach(ctx, id, dev); err != nil {
			return err
		}
	}
	return nil
}

// errRepaired is check's report that e2fsck corrected something.
var errRepaired = errors.New("filesystem repaired")

// check runs e2fsck on img: -p (preen) replays a journal an unclean stop
// left and fixes what is safe without asking; force checks a clean
// filesystem too (resize2fs wants one freshly checked). e2fsck(8)'s exit
// status: 0 clean, 1 corrected, 2 corrected (reboot, for a mounted root),
// 4 and above errors left or a failure.
func (s *Images) check(ctx context.Context, img string, force bool) error {
	args := []string{"-p"}
	if force {
		args = append(args, "-f")
	}
	_, err := s.cfg.Runner.Run(ctx, "e2fsck", append(args, img)...)
	var re *host.RunError
	switch {
	case err == nil:
		return nil
	case errors.As(err, &re) && (re.ExitCode == 1 || re.ExitCode == 2):
		return errRepaired
	case errors.As(err, &re) && re.ExitCode >= 4:
		return fmt.Errorf("%w: %w", ErrCorrupt, err)
	}
	return err
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}
