package host

import (
	"context"
	"log/slog"
)

// How the tenancy's users' processes are ended and released with their
// allocation's cgroup (cgroups.go); each is a no-op without Cgroups.

// cgroupMembers adds to pids the processes in the user's cgroup: those
// a set-uid program started as another uid are the allocation's too.
func (t *Tenancy) cgroupMembers(name string, pids []int) ([]int, error) {
	if t == nil || t.Cgroups == nil {
		return pids, nil
	}
	m, err := t.Cgroups.members(name)
	if err != nil {
		return nil, err
	}
	for _, pid := range m {
		if !containsInt(pids, pid) {
			pids = append(pids, pid)
		}
	}
	return pids, nil
}

// cgroupKillOnce writes the user's cgroup.kill, where there is one.
func (t *Tenancy) cgroupKillOnce(name string) {
	if t != nil && t.Cgroups != nil {
		t.Cgroups.killOnce(name)
	}
}

// cgroupKill ends every process in the user's cgroup (Cgroups.Kill).
func (t *Tenancy) cgroupKill(ctx context.Context, name string) error {
	if t == nil || t.Cgroups == nil {
		return nil
	}
	return t.Cgroups.Kill(ctx, name)
}

// cgroupRemove kills what is in the user's cgroup and removes it
// (Cgroups.Remove).
func (t *Tenancy) cgroupRemove(ctx context.Context, name string) error {
	if t == nil || t.Cgroups == nil {
		return nil
	}
	return t.Cgroups.Remove(ctx, name)
}

// nodeCgroups opens the node's allocation cgroups for NodeTenancy: what
// cannot be used is a warning in the log, and the node goes on without
// (nil), never silently.
func nodeCgroups(cfg CgroupConfig, log *slog.Logger) *Cgroups {
	cg, err := OpenCgroups(cfg)
	if err != nil {
		log.Warn("tenant isolation: no per-allocation cgroups; tenants' memory and processes are limited only by OOM scores and RLIMIT_NPROC",
			"err", err)
		return nil
	}
	for _, w := range cg.Warnings {
		log.Warn("tenant isolation", "cgroups", w)
	}
	log.Info("tenant isolation: per-allocation cgroups", "cgroup_version", cg.Version(),
		"tenant_memory_max", cg.MemoryMax(), "tenant_pids_max", cg.MaxProcs(), "dirs", cg.parents())
	return cg
}
