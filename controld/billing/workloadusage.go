package billing

import "time"

// WorkloadShare is what a workload with gpus GPUs (its own count: all of
// the allocation's, its first N, or none) that ran from started to ended
// (nil: it runs, so to now) used of its allocation u (with its windows,
// AllocationWindows): its running time in whole seconds, that time × its
// GPUs, and its share of the allocation's charged windows
// over that time (Share, as a job's cost). Nothing is charged for it: the
// allocation's own charge is the same with or without workloads
// (docs/apps.md, "Metering").
func WorkloadShare(u Usage, gpus int, started time.Time, ended *time.Time, now time.Time) (seconds, gpuSeconds, amountMinor int64) {
	end := now
	if ended != nil {
		end = *ended
	}
	if !end.After(started) {
		return 0, 0, 0
	}
	seconds = int64(end.Sub(started) / time.Second)
	_, amountMinor = Share(u.Windows, started, end)
	return seconds, seconds * int64(gpus), amountMinor
}
