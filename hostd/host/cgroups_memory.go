package host

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
)

// How much memory the allocations' cgroups get (see cgroups.go).

// availableMemory is the node's memory (MemTotal), or hostd's cgroup's
// limit if lower.
func availableMemory(ownLimit string) (int64, error) {
	b, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		return 0, err
	}
	var total int64
	for _, l := range strings.Split(string(b), "\n") {
		if f := strings.Fields(l); len(f) >= 2 && f[0] == "MemTotal:" {
			kb, err := strconv.ParseInt(f[1], 10, 64)
			if err != nil {
				return 0, fmt.Errorf("meminfo: %w", err)
			}
			total = kb << 10
		}
	}
	if total <= 0 {
		return 0, errors.New("meminfo: no MemTotal")
	}
	if lim, err := readInt(ownLimit); err == nil && lim > 0 && lim < total {
		total = lim
	}
	return total, nil
}

// tenantMemory is the tenants' limit: MemoryMax, or avail minus the
// reserve.
func tenantMemory(cfg CgroupConfig, avail int64) (int64, error) {
	if cfg.MemoryMax > 0 {
		return cfg.MemoryMax, nil
	}
	if cfg.MemoryReserve < 0 {
		return 0, fmt.Errorf("%w: negative memory reserve %d", ErrCgroupsUnavailable, cfg.MemoryReserve)
	}
	reserve := DefaultMemoryReserve(avail)
	if cfg.MemoryReserve > 0 {
		reserve = cfg.MemoryReserve
	}
	if reserve >= avail {
		return 0, fmt.Errorf("%w: the memory reserve (%d bytes) is not below the node's memory (%d bytes)", ErrCgroupsUnavailable, reserve, avail)
	}
	return avail - reserve, nil
}

// DefaultMemoryReserve is the memory kept for the platform on a node
// with total bytes: the larger of 1 GiB and 5%.
func DefaultMemoryReserve(total int64) int64 {
	return max(minMemoryReserve, total/20)
}
