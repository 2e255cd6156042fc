//go:build faultinject

package agent

import (
	"os"
	"syscall"
)

// CrashEnv names the environment variable a test build of hostd reads:
// at the crash point it names (CrashAfterAccept, ...), hostd kills
// itself with SIGKILL, as a crash would stop it (the crash tests of
// docs/decisions/0043-task-path.md).
const CrashEnv = "GPUAAS_HOSTD_CRASH_AT"

// crashAt kills the process at step when CrashEnv names it, after
// flushing what it published (the answer or report just sent).
func (a *Agent) crashAt(step string) {
	if os.Getenv(CrashEnv) != step {
		return
	}
	if a.nc != nil {
		_ = a.nc.Flush()
	}
	_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
	select {} // the signal is on its way
}
