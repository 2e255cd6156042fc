//go:build linux

package volsftp

import (
	"errors"
	"fmt"
	"strconv"
	"syscall"

	"golang.org/x/sys/unix"
)

// enter chroots into the directory and becomes the unprivileged user,
// checking that root is gone for good.
func enter(args []string) error {
	if len(args) != 3 {
		return fmt.Errorf("want DIR UID GID, got %d arguments", len(args))
	}
	dir := args[0]
	uid, err1 := strconv.Atoi(args[1])
	gid, err2 := strconv.Atoi(args[2])
	if err1 != nil || err2 != nil || uid <= 0 || gid <= 0 {
		return fmt.Errorf("uid %q and gid %q must be positive numbers (never root)", args[1], args[2])
	}
	if err := syscall.Chroot(dir); err != nil {
		return fmt.Errorf("chroot %s: %w", dir, err)
	}
	if err := syscall.Chdir("/"); err != nil {
		return fmt.Errorf("chdir: %w", err)
	}
	if err := syscall.Setgroups(nil); err != nil {
		return fmt.Errorf("setgroups: %w", err)
	}
	if err := syscall.Setgid(gid); err != nil {
		return fmt.Errorf("setgid %d: %w", gid, err)
	}
	if err := syscall.Setuid(uid); err != nil {
		return fmt.Errorf("setuid %d: %w", uid, err)
	}
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		return fmt.Errorf("no_new_privs: %w", err)
	}
	// Setuid from root drops the saved uid too; prove root cannot come back.
	if syscall.Setuid(0) == nil || syscall.Getuid() != uid || syscall.Geteuid() != uid || syscall.Getegid() != gid {
		return errors.New("could not drop root")
	}
	syscall.Umask(0o022)
	return nil
}
