//go:build linux

package alloc

import (
	"os"

	"golang.org/x/sys/unix"
)

// cbreak turns off line buffering and echo on terminal f, keeping signals
// (Ctrl-C) and output processing, and returns what restores it.
func cbreak(f *os.File) func() {
	fd := int(f.Fd())
	old, err := unix.IoctlGetTermios(fd, unix.TCGETS)
	if err != nil {
		return func() {}
	}
	t := *old
	t.Lflag &^= unix.ICANON | unix.ECHO
	t.Cc[unix.VMIN], t.Cc[unix.VTIME] = 1, 0
	if err := unix.IoctlSetTermios(fd, unix.TCSETS, &t); err != nil {
		return func() {}
	}
	return func() { _ = unix.IoctlSetTermios(fd, unix.TCSETS, old) }
}
