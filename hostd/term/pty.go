package term

import (
	"os"
	"os/user"
	"strconv"
	"syscall"

	"github.com/creack/pty"
	"golang.org/x/sys/unix"
)

// openPTY opens a PTY pair. creack/pty leaves the master in blocking mode
// (its ioctls use Fd()), where Close does not interrupt a Read; the master
// is re-made pollable so that closing it ends the copy goroutines.
func openPTY() (ptmx, tty *os.File, err error) {
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

// control runs fn on f's descriptor without switching it to blocking mode
// (as Fd() would).
func control(f *os.File, fn func(fd int) error) error {
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

// setWinsize sets the terminal size, clamped to what the kernel holds.
func setWinsize(ptmx *os.File, cols, rows, width, height uint32) error {
	ws := &unix.Winsize{Col: clamp16(cols), Row: clamp16(rows), Xpixel: clamp16(width), Ypixel: clamp16(height)}
	return control(ptmx, func(fd int) error { return unix.IoctlSetWinsize(fd, unix.TIOCSWINSZ, ws) })
}

func clamp16(v uint32) uint16 {
	if v > 0xffff {
		return 0xffff
	}
	return uint16(v)
}

// foregroundGroup is the terminal's foreground process group.
func foregroundGroup(ptmx *os.File) (int, error) {
	var pgid int
	err := control(ptmx, func(fd int) error {
		var err error
		pgid, err = unix.IoctlGetInt(fd, unix.TIOCGPGRP)
		return err
	})
	return pgid, err
}

// chownTTY gives the terminal to the user, group tty when there is one,
// mode 0620, as sshd does.
func chownTTY(tty *os.File, cred *syscall.Credential) error {
	gid := int(cred.Gid)
	if g, err := user.LookupGroup("tty"); err == nil {
		if n, err := strconv.Atoi(g.Gid); err == nil {
			gid = n
		}
	}
	if err := tty.Chown(int(cred.Uid), gid); err != nil {
		return err
	}
	return tty.Chmod(0o620)
}
