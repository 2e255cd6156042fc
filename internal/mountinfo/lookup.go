package mountinfo

import (
	"fmt"
	"os"
	"strings"

	"golang.org/x/sys/unix"
)

// OfDevice returns the mounts of device dev ("major:minor") in ms, in
// their order.
func OfDevice(ms []Mount, dev string) []Mount {
	return filter(ms, func(m Mount) bool { return m.Device == dev })
}

// At returns the mounts at point in ms, in their order: the last one is
// on top.
func At(ms []Mount, point string) []Mount {
	return filter(ms, func(m Mount) bool { return m.Point == point })
}

// Under returns the mounts strictly below directory dir in ms (not at
// dir itself), in their order.
func Under(ms []Mount, dir string) []Mount {
	prefix := strings.TrimSuffix(dir, "/") + "/"
	return filter(ms, func(m Mount) bool { return m.Point != dir && strings.HasPrefix(m.Point, prefix) })
}

func filter(ms []Mount, keep func(Mount) bool) []Mount {
	var out []Mount
	for _, m := range ms {
		if keep(m) {
			out = append(out, m)
		}
	}
	return out
}

// DeviceOf returns the device number ("major:minor", as a mount table
// names it) of the filesystem that holds path, following links; it fails
// as os.Stat does.
func DeviceOf(path string) (string, error) {
	var st unix.Stat_t
	if err := unix.Stat(path, &st); err != nil {
		return "", &os.PathError{Op: "stat", Path: path, Err: err}
	}
	dev := uint64(st.Dev) //nolint:unconvert // Dev's type differs by platform
	return fmt.Sprintf("%d:%d", unix.Major(dev), unix.Minor(dev)), nil
}
