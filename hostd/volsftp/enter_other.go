//go:build !linux

package volsftp

import "errors"

// enter refuses: nodes run Linux, where chroot, the uid drop and
// no_new_privs are what confine the session (enter_linux.go).
func enter([]string) error {
	return errors.New("volume sftp is served by Linux nodes only")
}
