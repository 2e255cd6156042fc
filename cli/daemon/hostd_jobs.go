package daemon

import (
	"log/slog"

	hostenv "github.com/gpuaas/gpuaas/hostd/env"
	"github.com/gpuaas/gpuaas/hostd/host"
	"github.com/gpuaas/gpuaas/hostd/tasks"
)

// jobEnvs opens allocations' environments for jobs (hostd/tasks job.go),
// with the accounts and hypervisor the terminal server uses; nil (no
// jobs) when it cannot.
func jobEnvs(stateDir string, accounts hostenv.Accounts, hv host.Hypervisor, log *slog.Logger) tasks.EnvOpener {
	f, err := hostenv.NewFactory(hostenv.Config{StateDir: stateDir, Accounts: accounts, Hypervisor: hv, Log: log})
	if err != nil {
		return nil
	}
	return f
}
