// Package volume keeps a node's persistent volumes: data that outlives
// the allocations it is attached to (docs/volumes.md). A volume is an
// ext4 filesystem in a preallocated image file under the node's data
// directory, loop-mounted where an allocation uses it; the image's size
// is the volume's hard limit
// (docs/decisions/0016-volumes-ext4-images.md says why not LVM).
//
// Store is what hostd's volume tasks and the provision/release paths
// need; Images is the implementation, used on real nodes and, as root,
// by the sim.
package volume

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"

	"github.com/gpuaas/gpuaas/hostd/host"
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
	// Size is the image's size: the filesystem's hard limit, in bytes.
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
	// Dir holds the images (Dir/<id>.img). Required; made if missing.
	Dir string
	// Runner runs mkfs.ext4, e2fsck, resize2fs, mount and losetup
	// (default host.ExecRunner).
	Runner host.Runner
	Log    *slog.Logger
}

// CheckAndSetDefaults validates c and fills defaults.
func (c *Config) CheckAndSetDefaults() error {
	if c.Dir == "" || !filepath.IsAbs(c.Dir) {
		return errors.New("volume store: Dir must be an absolute path")
	}
	if c.Runner == nil {
		c.Runner = host.ExecRunner{}
	}
	if c.Log == nil {
		c.Log = slog.New(slog.DiscardHandler)
	}
	return nil
}

// Images is a Store of ext4 image files.
type Images struct {
	cfg Config
	// locks serialises operations per volume.
	locks keyedMutex
}

var _ Store = (*Images)(nil)

// New returns the volumes kept in cfg.Dir.
func New(cfg Config) (*Images, error) {
	if err := cfg.CheckAndSetDefaults(); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(cfg.Dir, 0o700); err != nil {
		return nil, fmt.Errorf("volume store: %w", err)
	}
	return &Images{cfg: cfg}, nil
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

// image is volume id's image file.
func (s *Images) image(id string) string { return filepath.Join(s.cfg.Dir, id+".img") }
