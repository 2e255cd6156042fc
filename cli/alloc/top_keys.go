package alloc

import (
	"os"

	"github.com/gpuaas/gpuaas/cli/cmdutil"
)

// quitKeys ends `alloc top` on a terminal when the user presses q (or Q),
// as top(1) does. A local terminal is put in cbreak mode for that (each
// key read at once, not echoed; Ctrl-C still interrupts) and restored by
// the returned func; over SSH the client's terminal is raw already and
// keys arrive as they are typed. Off a terminal it returns a nil channel
// (never ready) and reads nothing: stdin may be a script's.
func quitKeys(ios *cmdutil.IOStreams) (<-chan struct{}, func()) {
	if !ios.IsStdinTTY() || !ios.IsStdoutTTY() || ios.In == nil {
		return nil, func() {}
	}
	restore := func() {}
	if f, ok := ios.In.(*os.File); ok {
		restore = cbreak(f)
	}
	quit := make(chan struct{})
	go func() {
		// This reader outlives top when no key comes: the process, or the
		// SSH session, ends right after.
		buf := make([]byte, 64)
		for {
			n, err := ios.In.Read(buf)
			for _, b := range buf[:n] {
				if b == 'q' || b == 'Q' {
					close(quit)
					return
				}
			}
			if err != nil {
				return
			}
		}
	}()
	return quit, restore
}
