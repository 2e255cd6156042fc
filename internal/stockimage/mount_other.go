//go:build !linux

package stockimage

import "errors"

// unmountUnder: images are built on Linux only.
func unmountUnder(string) error { return errors.New("stock images are built on Linux") }
