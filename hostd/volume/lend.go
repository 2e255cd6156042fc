package volume

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strings"

	"github.com/gpuaas/gpuaas/internal/fsutil"
)

// Lending a volume to a slice VM (docs/decisions/0030-volumes-in-slices.md):
// the image file (or the LV's device node, decision 0063) becomes a raw
// virtio disk of the guest, which mounts it itself. While it is lent the
// host never mounts it (Mount refuses with ErrLent), never deletes it,
// and never lends it to a second guest: a marker file Dir/<id>.img.lent,
// whatever the backend, names the allocation, so the lock outlives a
// hostd restart.

// ErrLent: Mount, Delete or Lend of a volume a slice VM has as a disk.
var ErrLent = errors.New("volume: attached to a slice VM")

// Lender is a Store whose volumes can be handed to a VM as disks.
type Lender interface {
	// Lend checks volume id's filesystem (e2fsck -p: a previous guest's
	// unclean stop is replayed here, not in the next guest) and marks it
	// lent to allocation alloc; it returns the image file or LV device for the VM.
	// Lending again to the same allocation is a retry.
	Lend(ctx context.Context, id, alloc string) (string, error)
	// Return ends a loan of allocation alloc, once its VM has stopped; a
	// volume not lent to alloc is left alone.
	Return(ctx context.Context, id, alloc string) error
	// LentTo lists the volumes lent to allocation alloc.
	LentTo(ctx context.Context, alloc string) ([]string, error)
}

var _ Lender = (*Images)(nil)

func (s *Images) marker(id string) string { return s.base(id) + ".lent" }

// guestMarker marks a volume a slice VM wrote as a raw disk since the
// host last checked it in full: <id>.img.guest.
func (s *Images) guestMarker(id string) string { return s.base(id) + ".guest" }

// guestWritten reports whether volume id was returned by a slice VM and
// not checked in full since.
func (s *Images) guestWritten(id string) bool {
	_, err := os.Lstat(s.guestMarker(id))
	return err == nil
}

// lentTo is the allocation volume id is lent to, "" when none.
func (s *Images) lentTo(id string) (string, error) {
	b, err := os.ReadFile(s.marker(id))
	if errors.Is(err, fs.ErrNotExist) {
		return "", nil
	}
	if err != nil {
		return "", err
	}
	return strings.TrimSpace(string(b)), nil
}

// Lend implements Lender.
func (s *Images) Lend(ctx context.Context, id, alloc string) (string, error) {
	if err := CheckID(id); err != nil {
		return "", err
	}
	if alloc == "" || strings.ContainsAny(alloc, "/\n") {
		return "", fmt.Errorf("%w: allocation %q", ErrInvalid, alloc)
	}
	unlock := s.locks.lock(id)
	defer unlock()
	info, err := s.stat(ctx, id)
	if err != nil {
		return "", fmt.Errorf("lend volume %s: %w", id, err)
	}
	switch holder, err := s.lentTo(id); {
	case err != nil:
		return "", fmt.Errorf("lend volume %s: %w", id, err)
	case holder == alloc:
		return s.image(id), nil
	case holder != "":
		return "", fmt.Errorf("lend volume %s to %s: %w (%s)", id, alloc, ErrLent, holder)
	}
	if info.MountPoint != "" {
		return "", fmt.Errorf("lend volume %s: %w at %s on the host", id, ErrMounted, info.MountPoint)
	}
	img := s.image(id)
	if err := s.detachStale(ctx, id); err != nil {
		return "", fmt.Errorf("lend volume %s: %w", id, err)
	}
	if err := s.check(ctx, img, false); err != nil && !errors.Is(err, errRepaired) {
		return "", fmt.Errorf("lend volume %s: %w", id, err)
	}
	if err := s.growFS(ctx, id); err != nil {
		return "", fmt.Errorf("lend volume %s: %w", id, err)
	}
	// QEMU runs as its own user (libvirt's DAC driver gives it the image
	// for the VM's life): it must traverse the directory, not list it.
	if err := os.Chmod(s.cfg.Dir, 0o711); err != nil {
		return "", fmt.Errorf("lend volume %s: %w", id, err)
	}
	if err := fsutil.WriteFile(s.marker(id), []byte(alloc+"\n"), 0o600, fsutil.Synced); err != nil {
		return "", fmt.Errorf("lend volume %s: %w", id, err)
	}
	s.cfg.Log.Info("volume lent to a slice VM", "volume", id, "allocation", alloc)
	return img, nil
}

// Return implements Lender.
func (s *Images) Return(_ context.Context, id, alloc string) error {
	if err := CheckID(id); err != nil {
		return err
	}
	unlock := s.locks.lock(id)
	defer unlock()
	holder, err := s.lentTo(id)
	if err != nil || holder != alloc {
		return err
	}
	// The guest had the raw disk: the filesystem is the tenant's work now,
	// superblock included, and a "clean" flag proves nothing. The next
	// host mount checks it in full first (Mount, guestWritten); the mark
	// is written before the loan's ends, so a crash between leaves both.
	if err := fsutil.WriteFile(s.guestMarker(id), []byte(alloc+"\n"), 0o600, fsutil.Synced); err != nil {
		return fmt.Errorf("return volume %s: %w", id, err)
	}
	if err := os.Remove(s.marker(id)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("return volume %s: %w", id, err)
	}
	s.cfg.Log.Info("volume returned by a slice VM", "volume", id, "allocation", alloc)
	return nil
}

// LentTo implements Lender.
func (s *Images) LentTo(_ context.Context, alloc string) ([]string, error) {
	ents, err := os.ReadDir(s.cfg.Dir)
	if err != nil {
		return nil, fmt.Errorf("volumes lent to %s: %w", alloc, err)
	}
	var out []string
	for _, e := range ents {
		id, ok := strings.CutSuffix(e.Name(), ".img.lent")
		if !ok || CheckID(id) != nil {
			continue
		}
		if holder, err := s.lentTo(id); err != nil {
			return nil, err
		} else if holder == alloc {
			out = append(out, id)
		}
	}
	return out, nil
}

// refuseLent is Mount's and Delete's check.
func (s *Images) refuseLent(id string) error {
	holder, err := s.lentTo(id)
	if err != nil {
		return err
	}
	if holder != "" {
		return fmt.Errorf("%w (%s)", ErrLent, holder)
	}
	return nil
}
