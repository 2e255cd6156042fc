package daemon

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/gpuaas/gpuaas/hostd/host"
	"github.com/gpuaas/gpuaas/hostd/tasks"
	"github.com/gpuaas/gpuaas/internal/obs"
)

// tenancyMetrics say whether the node's bare-metal allocations get
// cgroups of their own, and their memory limit: a node whose cgroups
// cannot be used shows on a dashboard, not only in its log.
func tenancyMetrics(t *host.Tenancy) []prometheus.Collector {
	on := prometheus.NewGauge(prometheus.GaugeOpts{Namespace: obs.Namespace, Subsystem: "hostd", Name: "tenant_cgroups",
		Help: "1 when each bare-metal allocation's processes run in a cgroup with memory and pids limits; 0 when this node's cgroups cannot be used (hostd's log says why at start)."})
	limit := prometheus.NewGauge(prometheus.GaugeOpts{Namespace: obs.Namespace, Subsystem: "hostd", Name: "tenant_memory_limit_bytes",
		Help: "Memory limit of bare-metal allocations' cgroups (the node's memory minus --tenant-memory-reserve); 0 without cgroups."})
	if t.Cgroups != nil {
		on.Set(1)
		limit.Set(float64(t.Cgroups.MemoryMax()))
	}
	return []prometheus.Collector{on, limit}
}

// countHardStops counts the guests env's releases had to destroy after
// their graceful timeout (tasks.Env.HardStop): a guest that ignores ACPI.
func countHardStops(env *tasks.Env) prometheus.Collector {
	c := prometheus.NewCounter(prometheus.CounterOpts{Namespace: obs.Namespace, Subsystem: "hostd", Name: "vm_hard_stops_total",
		Help: "Slice VMs a release destroyed because they did not power off within the graceful timeout (hostd logs each)."})
	env.HardStop = c.Inc
	return c
}
