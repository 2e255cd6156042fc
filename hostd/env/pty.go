package env

import (
	"os"
	"os/user"
	"strconv"
	"syscall"
)

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
