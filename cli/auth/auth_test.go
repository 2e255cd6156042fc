package auth

import (
	"bytes"

	"github.com/gpuaas/gpuaas/cli/cmdutil"
	"github.com/gpuaas/gpuaas/cli/cmdutil/cmdtest"
)

var now = cmdtest.Now // the clock of cmdtest.Factory

func testStreams(tty bool) (*cmdutil.IOStreams, *bytes.Buffer, *bytes.Buffer, *bytes.Buffer) {
	ios, in, out, errOut := cmdutil.Test()
	ios.SetStdinTTY(tty)
	ios.SetStdoutTTY(tty)
	ios.SetStderrTTY(tty)
	ios.SetNoColor(true)
	return ios, in, out, errOut
}
