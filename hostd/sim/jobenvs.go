package sim

import (
	"log/slog"

	hostenv "github.com/gpuaas/gpuaas/hostd/env"
	"github.com/gpuaas/gpuaas/hostd/tasks"
)

// jobEnvs opens the sim's allocations' environments for jobs, as the
// terminal server does (its sandbox users, its VMs); nil when it cannot.
func (h *Host) jobEnvs(log *slog.Logger) tasks.EnvOpener {
	f, err := hostenv.NewFactory(hostenv.Config{StateDir: h.StateDir, Accounts: h.Users.Accounts(),
		Hypervisor: h.Hypervisor, Log: log})
	if err != nil {
		return nil
	}
	return f
}
