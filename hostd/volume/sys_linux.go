package volume

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strings"

	"golang.org/x/sys/unix"
)

// allocate reserves n bytes of f from off on (fallocate(2), mode 0): the
// blocks are the node's promise to the volume.
func allocate(f *os.File, off, n int64) error {
	return unix.Fallocate(int(f.Fd()), 0, off, n)
}

// fsSpace is what the filesystem holding path has in use and free for
// unprivileged writers, in bytes.
func fsSpace(path string) (used, avail int64, err error) {
	var st unix.Statfs_t
	if err := unix.Statfs(path, &st); err != nil {
		return 0, 0, err
	}
	bs := int64(st.Bsize)
	return int64(st.Blocks-st.Bfree) * bs, int64(st.Bavail) * bs, nil
}

// blockDevNumber is dev's device number as mountinfo writes it
// ("253:3"), or "" when dev is no block device.
func blockDevNumber(dev string) string {
	var st unix.Stat_t
	if err := unix.Stat(dev, &st); err != nil || st.Mode&unix.S_IFMT != unix.S_IFBLK {
		return ""
	}
	return fmt.Sprintf("%d:%d", unix.Major(st.Rdev), unix.Minor(st.Rdev))
}

// deviceMapper says why logical volumes cannot be activated on this
// kernel, or nil: opening device-mapper's control device loads the
// module where it is one, and fails with ENODEV where the kernel has no
// device-mapper at all. A missing node is LVM's to make, when
// /proc/misc lists device-mapper.
func deviceMapper() error {
	f, err := os.OpenFile("/dev/mapper/control", os.O_RDWR, 0)
	if err == nil {
		return f.Close()
	}
	if errors.Is(err, fs.ErrNotExist) {
		if b, rerr := os.ReadFile("/proc/misc"); rerr == nil && strings.Contains(string(b), "device-mapper") {
			return nil
		}
	}
	return fmt.Errorf("%w: this kernel has no device-mapper (%w)", errors.ErrUnsupported, err)
}
