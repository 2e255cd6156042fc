package api

import (
	"context"
	"fmt"
	"strings"
	"time"
)

// Billing event kinds, told to every member of the project.
const (
	// EventBillingLowBalance: the balance fell below the project's
	// low-balance threshold (once per crossing).
	EventBillingLowBalance = "billing.low_balance"
	// EventBillingDepleted: the balance reached zero; the project's
	// allocations are released when the grace period ends unless it is
	// topped up.
	EventBillingDepleted = "billing.depleted"
)

// Ledger entry kinds (see controld/billing).
const (
	LedgerTopup      = "topup"
	LedgerUsage      = "usage"
	LedgerRefund     = "refund"
	LedgerAdjustment = "adjustment"
)

// BillingRequest names the project of a billing read (default: the
// Gpuaas-Project header).
type BillingRequest struct {
	Project string `json:"project,omitempty"`
}

// BillingBalance is a project account's state.
type BillingBalance struct {
	ProjectID    string `json:"project_id"`
	Project      string `json:"project"`
	BalanceMinor int64  `json:"balance_minor"`
	Currency     string `json:"currency"`
	// LowBalanceThresholdMinor is when a low-balance warning is sent.
	LowBalanceThresholdMinor int64 `json:"low_balance_threshold_minor"`
	LowBalance               bool  `json:"low_balance"`
	// DepletedAt is when the balance reached zero; GraceEndsAt when the
	// project's allocations are released if it is not topped up.
	DepletedAt  *time.Time `json:"depleted_at,omitempty"`
	GraceEndsAt *time.Time `json:"grace_ends_at,omitempty"`
	// BurnRateMinorPerHour is what the running allocations and volumes
	// cost per hour; StorageBurnMinorPerHour the volumes' part of it.
	BurnRateMinorPerHour    int64 `json:"burn_rate_minor_per_hour"`
	StorageBurnMinorPerHour int64 `json:"storage_burn_minor_per_hour"`
	RunningAllocations      int   `json:"running_allocations"`
	RunningVolumes          int   `json:"running_volumes"`
}

// LedgerEntry is one booking in a project's ledger.
type LedgerEntry struct {
	ID          int64     `json:"id"`
	ProjectID   string    `json:"project_id"`
	Kind        string    `json:"kind"`
	Reference   string    `json:"reference"`
	AmountMinor int64     `json:"amount_minor"` // credit > 0, debit < 0
	Currency    string    `json:"currency"`
	Memo        string    `json:"memo,omitempty"`
	ActorID     string    `json:"actor_id"`
	CreatedAt   time.Time `json:"created_at"`
	PrevHash    string    `json:"prev_hash"`
	Hash        string    `json:"hash"`
}

// BillingLedgerRequest pages through a project's ledger, newest first.
type BillingLedgerRequest struct {
	Project string `json:"project,omitempty"`
	Limit   int    `json:"limit,omitempty"`  // default and maximum 1000
	Before  int64  `json:"before,omitempty"` // only entries with smaller ids
}

// BillingLedgerResponse lists ledger entries, newest first.
type BillingLedgerResponse struct {
	ProjectID string        `json:"project_id"`
	Entries   []LedgerEntry `json:"entries"`
}

// BillingUsageRequest asks for a project's usage, or one allocation's
// with its windows.
type BillingUsageRequest struct {
	Project    string `json:"project,omitempty"`
	Allocation string `json:"allocation,omitempty"`
	// Volumes asks for the project's volumes' storage instead, each with
	// its latest Windows windows (default 60, at most 10000).
	Volumes bool `json:"volumes,omitempty"`
	Windows int  `json:"windows,omitempty"`
	// Jobs asks for what each job cost instead (Job: only that one): the
	// charge of its allocation over the job's running time (JobUsage).
	Jobs bool   `json:"jobs,omitempty"`
	Job  string `json:"job,omitempty"`
	// Workloads asks for each workload's GPU-seconds and share of its
	// allocation's charge instead (Workload: only that one): WorkloadUsage.
	Workloads bool   `json:"workloads,omitempty"`
	Workload  string `json:"workload,omitempty"`
}

// JobUsage is what a job cost: the charged windows of the allocation it
// ran on, over the part of each that the job ran in (from its start to
// its end, or to now while it runs), pro rata by the second and rounded
// down once (docs/jobs.md, "Cost"). The time its allocation was
// provisioning, or active before or after it, is the allocation's
// (AllocationAmountMinor, `billing usage --alloc`), not the job's.
type JobUsage struct {
	JobID        string     `json:"job_id"`
	Name         string     `json:"name,omitempty"`
	State        string     `json:"state"`
	AllocationID string     `json:"allocation_id"`
	SKU          string     `json:"sku,omitempty"`
	GPUs         int        `json:"gpus,omitempty"`
	StartedAt    *time.Time `json:"started_at,omitempty"`
	EndedAt      *time.Time `json:"ended_at,omitempty"`
	// Seconds is the job's charged running time; AmountMinor its cost.
	Seconds     int64  `json:"seconds"`
	AmountMinor int64  `json:"amount_minor"`
	Currency    string `json:"currency"`
	// AllocationAmountMinor is its allocation's whole charge so far.
	AllocationAmountMinor int64 `json:"allocation_amount_minor"`
}

// VolumeUsage is what a volume has been charged for its provisioned
// size, by the GiB-hour (docs/volumes.md, "Billing").
type VolumeUsage struct {
	VolumeID string `json:"volume_id"`
	Name     string `json:"name"`
	// SizeBytes and PricePerGiBMonthMinor are those of its latest segment
	// (a resize starts a new one).
	SizeBytes             int64      `json:"size_bytes"`
	PricePerGiBMonthMinor int64      `json:"price_per_gib_month_minor"`
	Currency              string     `json:"currency"`
	StartedAt             time.Time  `json:"started_at"`
	StoppedAt             *time.Time `json:"stopped_at,omitempty"`
	Running               bool       `json:"running"`
	Seconds               int64      `json:"seconds"`
	GiBHours              float64    `json:"gib_hours"`
	AmountMinor           int64      `json:"amount_minor"`
	// Windows are its latest charged windows, oldest first.
	Windows []VolumeUsageWindow `json:"windows,omitempty"`
}

// VolumeUsageWindow is one charged window of a volume.
type VolumeUsageWindow struct {
	Start       time.Time `json:"start"`
	End         time.Time `json:"end"`
	Seconds     int64     `json:"seconds"`
	SizeBytes   int64     `json:"size_bytes"`
	GiBHours    float64   `json:"gib_hours"`
	AmountMinor int64     `json:"amount_minor"`
}

// AllocationUsage is what an allocation has been charged while active.
type AllocationUsage struct {
	AllocationID         string        `json:"allocation_id"`
	SKU                  string        `json:"sku"`
	GPUs                 int           `json:"gpus"`
	PricePerGPUHourMinor int64         `json:"price_per_gpu_hour_minor"`
	Currency             string        `json:"currency"`
	StartedAt            time.Time     `json:"started_at"`
	StoppedAt            *time.Time    `json:"stopped_at,omitempty"`
	Seconds              int64         `json:"seconds"`
	AmountMinor          int64         `json:"amount_minor"`
	Windows              []UsageWindow `json:"windows,omitempty"`
}

// UsageWindow is one charged window of an allocation.
type UsageWindow struct {
	Start       time.Time `json:"start"`
	End         time.Time `json:"end"`
	Seconds     int64     `json:"seconds"`
	AmountMinor int64     `json:"amount_minor"`
}

// BillingUsageResponse lists allocations' usage, most recent first.
type BillingUsageResponse struct {
	ProjectID  string            `json:"project_id"`
	Usage      []AllocationUsage `json:"usage"`
	Volumes    []VolumeUsage     `json:"volumes,omitempty"`   // with Volumes
	Jobs       []JobUsage        `json:"jobs,omitempty"`      // with Jobs
	Workloads  []WorkloadUsage   `json:"workloads,omitempty"` // with Workloads
	TotalMinor int64             `json:"total_minor"`
	Currency   string            `json:"currency"`
}

// LedgerAccountCheck is what ops.ledger_verify found for one account.
type LedgerAccountCheck struct {
	ProjectID          string   `json:"project_id"`
	Entries            int64    `json:"entries"`
	BalanceMinor       int64    `json:"balance_minor"`        // sum of the entries
	CachedBalanceMinor int64    `json:"cached_balance_minor"` // the account row
	OK                 bool     `json:"ok"`
	Problems           []string `json:"problems,omitempty"`
}

// LedgerVerifyResponse is the outcome of recomputing every chain.
type LedgerVerifyResponse struct {
	OK       bool                 `json:"ok"`
	Accounts []LedgerAccountCheck `json:"accounts"`
}

// BillingLowBalance is the payload of a billing.low_balance event.
type BillingLowBalance struct {
	ProjectID      string `json:"project_id"`
	BalanceMinor   int64  `json:"balance_minor"`
	ThresholdMinor int64  `json:"threshold_minor"`
	Currency       string `json:"currency"`
}

// BillingDepleted is the payload of a billing.depleted event.
type BillingDepleted struct {
	ProjectID    string    `json:"project_id"`
	BalanceMinor int64     `json:"balance_minor"`
	Currency     string    `json:"currency"`
	GraceEndsAt  time.Time `json:"grace_ends_at"`
}

// FormatMoney renders an amount in minor units (cents) of an ISO 4217
// currency with two decimals: "$2.50", "€0.99", "-$1.00", "12.00 CHF"; an
// empty currency gives the bare amount.
func FormatMoney(minor int64, currency string) string {
	sign := ""
	if minor < 0 {
		sign, minor = "-", -minor
	}
	amount := fmt.Sprintf("%d.%02d", minor/100, minor%100)
	currency = strings.ToUpper(currency)
	if sym, ok := currencySymbols[currency]; ok {
		return sign + sym + amount
	}
	if currency == "" {
		return sign + amount
	}
	return sign + amount + " " + currency
}

var currencySymbols = map[string]string{"USD": "$", "EUR": "€", "GBP": "£"}

// BillingBalance returns a project's balance.
func (c *Client) BillingBalance(ctx context.Context, req BillingRequest) (*BillingBalance, error) {
	return Do(ctx, c, OpBillingBalance, req)
}

// BillingLedger lists a project's ledger entries, newest first.
func (c *Client) BillingLedger(ctx context.Context, req BillingLedgerRequest) (*BillingLedgerResponse, error) {
	return Do(ctx, c, OpBillingLedger, req)
}

// BillingUsage lists a project's usage per allocation, or one
// allocation's windows.
func (c *Client) BillingUsage(ctx context.Context, req BillingUsageRequest) (*BillingUsageResponse, error) {
	return Do(ctx, c, OpBillingUsage, req)
}

// LedgerVerify recomputes every account's hash chain and balance
// (admins).
func (c *Client) LedgerVerify(ctx context.Context) (*LedgerVerifyResponse, error) {
	return Do(ctx, c, OpOpsLedgerVerify, Empty{})
}

// FormatRunway renders seconds as the two largest units: "3d 4h",
// "5h 42m", "17m".
func FormatRunway(seconds int64) string {
	days, hours, mins := seconds/86400, seconds/3600%24, seconds/60%60
	switch {
	case seconds <= 0:
		return "none left"
	case days > 0:
		return fmt.Sprintf("%dd %dh", days, hours)
	case hours > 0:
		return fmt.Sprintf("%dh %dm", hours, mins)
	case mins > 0:
		return fmt.Sprintf("%dm", mins)
	}
	return "under a minute"
}
