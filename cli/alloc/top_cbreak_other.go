//go:build !linux

package alloc

import "os"

// cbreak leaves the terminal as it is off Linux: q then needs Enter.
func cbreak(*os.File) func() { return func() {} }
