//go:build linux

package env

import (
	"os"

	"golang.org/x/sys/unix"

	"github.com/gpuaas/gpuaas/hostd/env/ptyctl"
	"github.com/gpuaas/gpuaas/internal/sshwire"
)

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

// applyModes sets the terminal modes the client sent with pty-req (its
// own terminal's erase character, echo, ...) on tty; modes hostd does not
// know are skipped, as sshd skips them.
func applyModes(tty *os.File, modes string) error {
	if modes == "" {
		return nil
	}
	ms, err := sshwire.DecodeModes(modes)
	if err != nil {
		return err
	}
	return ptyctl.Control(tty, func(fd int) error {
		t, err := unix.IoctlGetTermios(fd, unix.TCGETS)
		if err != nil {
			return err
		}
		for _, m := range ms {
			op, v := m.Op, m.Value
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
