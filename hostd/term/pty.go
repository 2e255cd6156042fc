package term

import (
	"encoding/binary"
	"errors"
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

// Terminal mode opcodes (RFC 4254 section 8) and the termios fields they
// set. Opcodes 1-159 carry a uint32; 160-255 would carry more and end the
// parse, like 0 (TTY_OP_END).
var (
	ccModes = map[byte]int{
		1: unix.VINTR, 2: unix.VQUIT, 3: unix.VERASE, 4: unix.VKILL, 5: unix.VEOF, 6: unix.VEOL,
		7: unix.VEOL2, 8: unix.VSTART, 9: unix.VSTOP, 10: unix.VSUSP, 12: unix.VREPRINT,
		13: unix.VWERASE, 14: unix.VLNEXT, 18: unix.VDISCARD,
	}
	iflagModes = map[byte]uint32{
		30: unix.IGNPAR, 31: unix.PARMRK, 32: unix.INPCK, 33: unix.ISTRIP, 34: unix.INLCR, 35: unix.IGNCR,
		36: unix.ICRNL, 37: unix.IUCLC, 38: unix.IXON, 39: unix.IXANY, 40: unix.IXOFF, 41: unix.IMAXBEL,
		42: unix.IUTF8,
	}
	lflagModes = map[byte]uint32{
		50: unix.ISIG, 51: unix.ICANON, 52: unix.XCASE, 53: unix.ECHO, 54: unix.ECHOE, 55: unix.ECHOK,
		56: unix.ECHONL, 57: unix.NOFLSH, 58: unix.TOSTOP, 59: unix.IEXTEN, 60: unix.ECHOCTL,
		61: unix.ECHOKE, 62: unix.PENDIN,
	}
	oflagModes = map[byte]uint32{
		70: unix.OPOST, 71: unix.OLCUC, 72: unix.ONLCR, 73: unix.OCRNL, 74: unix.ONOCR, 75: unix.ONLRET,
	}
	cflagModes = map[byte]uint32{92: unix.PARENB, 93: unix.PARODD}
	// CS7 and CS8 are values of the CSIZE field, not flags: set, they
	// replace the character size; cleared, they leave it.
	csizeModes = map[byte]uint32{90: unix.CS7, 91: unix.CS8}
)

var errModes = errors.New("malformed terminal modes")

// applyModes sets the terminal modes the client sent with pty-req (its
// own terminal's erase character, echo, ...) on tty; modes hostd does not
// know are skipped, as sshd skips them.
func applyModes(tty *os.File, modes string) error {
	if modes == "" {
		return nil
	}
	return control(tty, func(fd int) error {
		t, err := unix.IoctlGetTermios(fd, unix.TCGETS)
		if err != nil {
			return err
		}
		b := []byte(modes)
		for len(b) > 0 {
			op := b[0]
			if op == 0 || op >= 160 {
				break
			}
			if len(b) < 5 {
				return errModes
			}
			v := binary.BigEndian.Uint32(b[1:5])
			b = b[5:]
			if i, ok := ccModes[op]; ok {
				t.Cc[i] = uint8(v)
			} else if f, ok := iflagModes[op]; ok {
				t.Iflag = setFlag(t.Iflag, f, v)
			} else if f, ok := lflagModes[op]; ok {
				t.Lflag = setFlag(t.Lflag, f, v)
			} else if f, ok := oflagModes[op]; ok {
				t.Oflag = setFlag(t.Oflag, f, v)
			} else if f, ok := cflagModes[op]; ok {
				t.Cflag = setFlag(t.Cflag, f, v)
			} else if f, ok := csizeModes[op]; ok && v != 0 {
				t.Cflag = t.Cflag&^unix.CSIZE | f
			}
		}
		return unix.IoctlSetTermios(fd, unix.TCSETS, t)
	})
}

func setFlag(flags, f, v uint32) uint32 {
	if v != 0 {
		return flags | f
	}
	return flags &^ f
}
