package detail

import (
	"slices"
	"time"

	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/tui/common"
)

// Tasks that start and end an allocation's paid time.
var (
	provisionTasks = []string{api.TaskVMProvision, api.TaskProvisionUser}
	releaseTasks   = []string{api.TaskVMRelease, api.TaskDeprovisionUser}
)

// activeSpan is how long a has been (or was) active as of now: from the
// end of its provisioning to the start of its release, per its timeline;
// without a timeline, from its last change while it is active.
func activeSpan(a api.Allocation, now time.Time) time.Duration {
	var start, end time.Time
	for _, p := range a.Timeline {
		switch {
		case slices.Contains(provisionTasks, p.Task) && p.Status == api.PhaseDone && p.At.After(start):
			start = p.At
		case slices.Contains(releaseTasks, p.Task) && end.IsZero():
			end = p.At
		}
	}
	switch a.State {
	case api.AllocActive:
		if start.IsZero() {
			start = a.UpdatedAt
		}
		end = now
	case api.AllocReleasing, api.AllocReleased, api.AllocReleaseFailed:
		if end.IsZero() {
			end = a.UpdatedAt
		}
	default: // requested, provisioning, failed: never active
		return 0
	}
	if start.IsZero() || end.Before(start) {
		return 0
	}
	return end.Sub(start)
}

// costMinor is what d of a costs, rounded down to a minor unit.
func costMinor(s api.SKU, gpus int, d time.Duration) int64 {
	return common.HourlyMinor(s, gpus) * int64(d) / int64(time.Hour)
}
