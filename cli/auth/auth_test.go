package auth

import (
	"github.com/gpuaas/gpuaas/cli/cmdutil/cmdtest"
)

var now = cmdtest.Now // the clock of cmdtest.Factory
