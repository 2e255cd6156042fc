package guestimage

import (
	"fmt"
	"os"
	"sort"
	"strings"
	"syscall"
)

// unmountUnder detaches every mount below dir, deepest first.
func unmountUnder(dir string) error {
	data, err := os.ReadFile("/proc/self/mounts")
	if err != nil {
		return err
	}
	var points []string
	for _, line := range strings.Split(string(data), "\n") {
		f := strings.Fields(line)
		if len(f) > 1 && strings.HasPrefix(f[1], dir+"/") {
			points = append(points, f[1])
		}
	}
	sort.Sort(sort.Reverse(sort.StringSlice(points)))
	for _, p := range points {
		if err := syscall.Unmount(p, syscall.MNT_DETACH); err != nil {
			return fmt.Errorf("unmount %s: %w", p, err)
		}
	}
	return nil
}

// mountProc mounts a proc filesystem at dir (a build chroot's /proc).
func mountProc(dir string) error { return syscall.Mount("proc", dir, "proc", 0, "") }

// unmountDetach detaches the mount at dir.
func unmountDetach(dir string) { _ = syscall.Unmount(dir, syscall.MNT_DETACH) }
