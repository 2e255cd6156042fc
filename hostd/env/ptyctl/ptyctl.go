// Package ptyctl opens and controls the pseudo-terminals that the
// allocations' environments (hostd/env) and the sim guests (hostd/sim) run
// PTY sessions on: a pair whose master can be closed under a pending Read,
// its window size, and its foreground process group (where a signal from
// the client goes, as a key press would).
package ptyctl

import (
	"os"

	"github.com/creack/pty"
	"golang.org/x/sys/unix"
)

// Open opens a PTY pair. creack/pty leaves the master in blocking mode
// (its ioctls use Fd()), where Close does not interrupt a Read; the master
// is re-made pollable so that closing it ends the copy goroutines.
func Open() (ptmx, tty *os.File, err error) {
	m, tty, err := pty.Open()
	if err != nil {
		return nil, nil, err
	}
	fd, err := unix.FcntlInt(m.Fd(), unix.F_DUPFD_CLOEXEC, 0)
	_ = m.Close()
	if err == nil {
		err = unix.SetNonblock(fd, true)
		if err != nil {
			_ = unix.Close(fd)
		}
	}
	if err != nil {
		_ = tty.Close()
		return nil, nil, err
	}
	return os.NewFile(uintptr(fd), "/dev/ptmx"), tty, nil
}

// Control runs fn on f's descriptor without switching it to blocking mode
// (as Fd() would).
func Control(f *os.File, fn func(fd int) error) error {
	rc, err := f.SyscallConn()
	if err != nil {
		return err
	}
	var ferr error
	if err := rc.Control(func(fd uintptr) { ferr = fn(int(fd)) }); err != nil {
		return err
	}
	return ferr
}

// SetWinsize sets the terminal's size in characters and pixels, each
// clamped to what the kernel holds.
func SetWinsize(ptmx *os.File, cols, rows, width, height uint32) error {
	ws := &unix.Winsize{Col: clamp16(cols), Row: clamp16(rows), Xpixel: clamp16(width), Ypixel: clamp16(height)}
	return Control(ptmx, func(fd int) error { return unix.IoctlSetWinsize(fd, unix.TIOCSWINSZ, ws) })
}

func clamp16(v uint32) uint16 {
	if v > 0xffff {
		return 0xffff
	}
	return uint16(v)
}

// ForegroundGroup is the terminal's foreground process group.
func ForegroundGroup(ptmx *os.File) (int, error) {
	var pgid int
	err := Control(ptmx, func(fd int) error {
		var err error
		pgid, err = unix.IoctlGetInt(fd, unix.TIOCGPGRP)
		return err
	})
	return pgid, err
}
