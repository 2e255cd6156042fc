package host

import (
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"syscall"
)

// What keeps a tenant who has a whole node from taking hostd down with it
// (docs/operators.md, "Tenant isolation"): hostd's OOM score is lowered,
// tenants' raised (Isolation.OOMScoreAdj), each allocation's memory and
// processes are bounded by a cgroup (Cgroups), and hostd's state is meant
// to be on a filesystem tenants cannot fill (CheckStateDisk says when it
// is not).

// AgentOOMScoreAdj is hostd's own oom_score_adj: the kernel ends nearly
// anything else first, but not never (-1000 would leave a runaway hostd
// to panic the node).
const AgentOOMScoreAdj = -900

// ProtectAgent lowers this process's OOM score to AgentOOMScoreAdj; it
// needs root (CAP_SYS_RESOURCE).
func ProtectAgent() error {
	if err := os.WriteFile("/proc/self/oom_score_adj", []byte(strconv.Itoa(AgentOOMScoreAdj)), 0); err != nil {
		return fmt.Errorf("protect hostd from the OOM killer: %w", err)
	}
	return nil
}

// CheckStateDisk reports, as an error to log, when hostd's state
// directory is on the same filesystem as a directory tenants can write
// (their homes, /tmp, /var/tmp, the tenancy's directory) and no blocks are
// reserved for root on it: a tenant filling it would stop hostd from
// writing its state. With root's reserve (ext4's default 5%, tune2fs -m),
// hostd, which runs as root, can still write when tenants cannot.
func CheckStateDisk(stateDir string, tenantDirs ...string) error {
	var st syscall.Stat_t
	if err := syscall.Stat(stateDir, &st); err != nil {
		return fmt.Errorf("state directory: %w", err)
	}
	var shared []string
	for _, d := range tenantDirs {
		var t syscall.Stat_t
		if syscall.Stat(d, &t) == nil && t.Dev == st.Dev {
			shared = append(shared, d)
		}
	}
	if len(shared) == 0 {
		return nil
	}
	var fs syscall.Statfs_t
	if err := syscall.Statfs(stateDir, &fs); err != nil {
		return fmt.Errorf("state directory: %w", err)
	}
	if fs.Bfree > fs.Bavail { // blocks only root may use
		return nil
	}
	return fmt.Errorf("%w: hostd's state directory %s shares its filesystem with %v, which tenants can write, "+
		"and no blocks are reserved for root on it: a tenant can fill it and stop hostd from writing its state "+
		"(put the state directory on a filesystem of its own, or reserve blocks for root: tune2fs -m)",
		ErrStateDiskShared, stateDir, shared)
}

// DefaultTenantDir is where a node keeps allocations' private /tmp and
// /var/tmp (Tenancy.Dir): on the filesystem tenants' /var/tmp was on.
const DefaultTenantDir = "/var/tmp/gpuaas-tenants"

// NodeTenancy is a real node's Tenancy (DefaultTenancy in
// DefaultTenantDir, with per-allocation cgroups made as cg says), once
// hostd has lowered its own OOM score and checked where its state is
// (ProtectAgent, CheckStateDisk): what cannot be done is logged, not
// fatal; Cgroups is nil when the node's cgroups cannot be used.
func NodeTenancy(stateDir string, cg CgroupConfig, log *slog.Logger) *Tenancy {
	if err := ProtectAgent(); err != nil {
		log.Warn("tenant isolation", "err", err)
	}
	if err := CheckStateDisk(stateDir, "/home", "/tmp", "/var/tmp", DefaultTenantDir); err != nil {
		log.Warn("tenant isolation", "err", err)
	}
	t := DefaultTenancy(stateDir, DefaultTenantDir)
	t.Cgroups = nodeCgroups(cg, log)
	return t
}
