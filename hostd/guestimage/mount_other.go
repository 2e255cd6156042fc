//go:build !linux

package guestimage

import "errors"

// unmountUnder is Linux-only: guest images are built with debootstrap on
// a Linux host.
func unmountUnder(string) error {
	return errors.New("guest images are built on Linux")
}

func mountProc(string) error { return errors.New("guest images are built on Linux") }

func unmountDetach(string) {}
