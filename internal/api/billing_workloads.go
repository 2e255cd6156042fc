package api

import "time"

// WorkloadUsage is what a workload used and its share of its
// allocation's charge (docs/apps.md, "Metering"): its running time (from
// running to its end, or to now while it runs), that time × its
// allocation's GPUs, and the allocation's charged windows over that time
// pro rata by the second, rounded down once — as a job's (JobUsage). It
// is a share, never a second charge: the allocation is charged as it
// would be without the workload (AllocationAmountMinor).
type WorkloadUsage struct {
	WorkloadID   string `json:"workload_id"`
	Name         string `json:"name,omitempty"`
	State        string `json:"state"`
	AllocationID string `json:"allocation_id"`
	Image        string `json:"image,omitempty"`
	SKU          string `json:"sku,omitempty"`
	// GPUs is the workload's own (its container's), not its allocation's.
	GPUs      int        `json:"gpus"`
	StartedAt *time.Time `json:"started_at,omitempty"`
	EndedAt   *time.Time `json:"ended_at,omitempty"`
	// Seconds is its running time in whole seconds; GPUSeconds that time
	// × its GPUs.
	Seconds    int64 `json:"seconds"`
	GPUSeconds int64 `json:"gpu_seconds"`
	// AmountMinor is its share of the allocation's charged windows.
	AmountMinor int64  `json:"amount_minor"`
	Currency    string `json:"currency"`
	// AllocationAmountMinor is its allocation's whole charge so far.
	AllocationAmountMinor int64 `json:"allocation_amount_minor"`
	// AppPricePerHourMinor is the app's own price per hour it runs at
	// (fixed when it was run; docs/apps.md, "Prices"), AppAmountMinor what
	// that price has been charged for it so far: ledger entries of kind
	// app, on top of the allocation's charge (never part of it).
	AppPricePerHourMinor int64 `json:"app_price_per_hour_minor"`
	AppAmountMinor       int64 `json:"app_amount_minor"`
}
