// Package volume keeps a node's persistent volumes: data that outlives
// the allocations it is attached to (docs/volumes.md). A volume is an
// ext4 filesystem whose container is its hard limit: by default a
// preallocated image file under the node's data directory, loop-mounted
// where an allocation uses it (docs/decisions/0016-volumes-ext4-images.md);
// on a node whose operator names an LVM volume group, a linear logical
// volume of that group, mounted directly
// (docs/decisions/0063-volumes-on-lvm.md).
//
// Store is what hostd's volume tasks and the provision/release paths
// need; Images is the implementation over either backend, used on real
// nodes and, as root, by the sim.
package volume

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"strings"

	"github.com/gpuaas/gpuaas/hostd/host"
	"github.com/gpuaas/gpuaas/internal/fsutil"
)

// Store is a node's volumes; hostd/tasks uses it so a test or the sim
// can hold its volumes elsewhere.
type Store interface {
	// Create makes volume id of size bytes; creating one that exists
	// with the same size is not an error (a retried task).
	Create(ctx context.Context, id string, size int64) (Info, error)
	// Grow makes volume id size bytes, mounted or not; never smaller.
	Grow(ctx context.Context, id string, size int64) (Info, error)
	// Mount mounts volume id at target, checking its filesystem first
	// (e2fsck -p: a journal left by an unclean stop is replayed), and
	// gives its files to uid:gid.
	Mount(ctx context.Context, id, target string, uid, gid int) (Info, error)
	// Unmount unmounts volume id wherever it is mounted and detaches its
	// loop device; an unmounted volume is not an error.
	Unmount(ctx context.Context, id string) error
	// Delete removes volume id and its blocks; a mounted volume is
	// refused (ErrMounted), a missing one is not an error.
	Delete(ctx context.Context, id string) error
	// Stat reports volume id.
	Stat(ctx context.Context, id string) (Info, error)
	// Free is how many bytes a new volume may take.
	Free(ctx context.Context) (int64, error)
	// List reports every volume of the node, by id.
	List(ctx context.Context) ([]Info, error)
}

// Info is a volume's state on the node.
type Info struct {
	ID string `json:"id"`
	// Size is the image's or the LV's size: the filesystem's hard limit,
	// in bytes (an LV's is rounded up to whole extents).
	Size int64 `json:"size"`
	// FSSize is the filesystem's size; below Size after a Grow the
	// kernel could not apply online, until the next Mount grows it.
	FSSize int64 `json:"fs_size"`
	// Used is what the filesystem uses, when mounted (0 otherwise).
	Used int64 `json:"used,omitempty"`
	// MountPoint is where the volume is mounted; empty when it is not.
	MountPoint string `json:"mount_point,omitempty"`
	// Repaired says e2fsck changed something on Mount (a replayed
	// journal after an unclean stop, or a repair).
	Repaired bool `json:"repaired,omitempty"`
	// Reowned counts the files Mount gave to a new owner.
	Reowned int `json:"reowned,omitempty"`
}

// Size limits of a volume.
const (
	// MiB is the unit sizes are counted in: a volume's size is a whole
	// number of MiB.
	MiB int64 = 1 << 20
	// MinSize is the smallest volume: ext4 with a journal needs a few
	// MiB of its own.
	MinSize = 16 * MiB
	// MaxSize is the largest volume, 16 TiB: far below ext4's limit,
	// it bounds what a typo in a size can reserve.
	MaxSize = 16 << 40
)

// Config configures Images.
type Config struct {
	// Dir holds the images (Dir/<id>.img) and, whatever the backend, the
	// marks of volumes lent to slice VMs. Required; made if missing.
	Dir string
	// VolumeGroup, when set, is the LVM volume group the volumes are
	// logical volumes of, instead of image files in Dir (lvm.go). The
	// group must exist; hostd never makes or changes one.
	VolumeGroup string
	// Runner runs mkfs.ext4, e2fsck, resize2fs, mount, losetup and the
	// LVM commands (default host.ExecRunner).
	Runner host.Runner
	Log    *slog.Logger
}

// CheckAndSetDefaults validates c and fills defaults.
func (c *Config) CheckAndSetDefaults() error {
	if c.Dir == "" || !filepath.IsAbs(c.Dir) {
		return errors.New("volume store: Dir must be an absolute path")
	}
	if c.VolumeGroup != "" && !vgPattern.MatchString(c.VolumeGroup) {
		return fmt.Errorf("volume store: %q is not a volume group name", c.VolumeGroup)
	}
	if c.Runner == nil {
		c.Runner = host.ExecRunner{}
	}
	if c.Log == nil {
		c.Log = slog.New(slog.DiscardHandler)
	}
	return nil
}

// Images is a Store of ext4 filesystems, each in an image file or, with
// Config.VolumeGroup, in a logical volume (the name predates the LVM
// backend).
type Images struct {
	cfg Config
	b   backend
	// locks serialises operations per volume.
	locks keyedMutex
}

var _ Store = (*Images)(nil)

// New returns the volumes kept in cfg.Dir, or in cfg.VolumeGroup when
// set: a group LVM does not know is refused here, at hostd's start.
func New(cfg Config) (*Images, error) {
	if err := cfg.CheckAndSetDefaults(); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(cfg.Dir, 0o700); err != nil {
		return nil, fmt.Errorf("volume store: %w", err)
	}
	s := &Images{cfg: cfg, b: &files{dir: cfg.Dir, runner: cfg.Runner}}
	if cfg.VolumeGroup != "" {
		// LVM reads a group's metadata without device-mapper, but no LV
		// can be activated: refused here rather than at every Create.
		if err := deviceMapper(); err != nil {
			return nil, fmt.Errorf("volume store: volume group %s: %w", cfg.VolumeGroup, err)
		}
		lv := &lvm{vg: cfg.VolumeGroup, runner: cfg.Runner}
		if _, err := lv.free(context.Background()); err != nil {
			return nil, fmt.Errorf("volume store: %w", err)
		}
		if err := lv.sweep(context.Background()); err != nil {
			return nil, fmt.Errorf("volume store: %w", err)
		}
		s.b = lv
	}
	if err := s.keepBackend(); err != nil {
		return nil, fmt.Errorf("volume store: %w", err)
	}
	return s, nil
}

// backendFile records in Dir which backend holds the node's volumes: a
// store started on the other one would report none of them, and controld
// would mark every one lost (docs/decisions/0063-volumes-on-lvm.md).
const backendFile = "backend"

// keepBackend refuses to start the store on another backend than the
// one that holds the node's volumes, and records this one's name.
func (s *Images) keepBackend() error {
	want := "images"
	if s.cfg.VolumeGroup != "" {
		want = "lvm:" + s.cfg.VolumeGroup
	}
	p := filepath.Join(s.cfg.Dir, backendFile)
	had, err := os.ReadFile(p)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		had = []byte("images") // before the record: image files only
	case err != nil:
		return err
	}
	if have := strings.TrimSpace(string(had)); have != want {
		imgs, _ := filepath.Glob(filepath.Join(s.cfg.Dir, "*.img"))
		if have != "images" || len(imgs) > 0 {
			return fmt.Errorf("%w: this node's volumes are on %s, not %s: start hostd as before, or move them first (when none is left, remove %s)",
				ErrInvalid, have, want, p)
		}
	}
	if have, _ := os.ReadFile(p); strings.TrimSpace(string(have)) == want {
		return nil
	}
	return fsutil.WriteFile(p, []byte(want+"\n"), 0o600, fsutil.Durable)
}

// idPattern is what a volume id may be: controld's "vol-" ids, and
// nothing that could name another path.
var idPattern = regexp.MustCompile(`^[a-z0-9][a-z0-9-]{0,62}$`)

// CheckID refuses an id that is not a volume id.
func CheckID(id string) error {
	if !idPattern.MatchString(id) {
		return fmt.Errorf("%w: volume id %q", ErrInvalid, id)
	}
	return nil
}

// CheckSize refuses a size that is not a whole number of MiB between
// MinSize and MaxSize.
func CheckSize(size int64) error {
	switch {
	case size < MinSize:
		return fmt.Errorf("%w: size %d is below the minimum %d MiB", ErrInvalid, size, MinSize/MiB)
	case size > MaxSize:
		return fmt.Errorf("%w: size %d is above the maximum %d TiB", ErrInvalid, size, MaxSize>>40)
	case size%MiB != 0:
		return fmt.Errorf("%w: size %d is not a whole number of MiB", ErrInvalid, size)
	}
	return nil
}

// image is what holds volume id's filesystem: its image file, or its
// logical volume's device node.
func (s *Images) image(id string) string { return s.b.path(id) }

// base is the prefix of volume id's marks in Dir, whatever the backend
// (lend.go): Dir/<id>.img, the image backend's names.
func (s *Images) base(id string) string { return filepath.Join(s.cfg.Dir, id+".img") }
