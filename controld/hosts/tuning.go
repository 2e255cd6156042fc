package hosts

import "time"

// Tuning is how controld's side of hostd behaves: heartbeats, deadlines,
// report checks and discovery. Zero values take the defaults.
type Tuning struct {
	// HeartbeatInterval nodes are told to use (default 5s).
	HeartbeatInterval time.Duration
	// DownAfter marks a silent node down (default 3 heartbeats).
	DownAfter time.Duration
	// EnvelopeTTL is how long a signed envelope stays valid (default 5m).
	EnvelopeTTL time.Duration
	// TaskDeadline fails a task no node has finished by then, so nothing
	// waits forever on a dead node (default 15m).
	TaskDeadline time.Duration
	// DeliveryTimeout bounds one delivery request (default 5s).
	DeliveryTimeout time.Duration
	// ReportMaxAge is the skew window of node reports: one sent longer
	// ago, or further ahead, than this is refused (default 2m).
	ReportMaxAge time.Duration
	// SlotSubnet is passed to topology discovery (node.Reports; hosts
	// does not read it).
	SlotSubnet string
	// AutoApproveSlots approves discovered slots at once, dev only
	// (node.Settlers; hosts does not read it).
	AutoApproveSlots bool
}

// CheckAndSetDefaults fills the defaults.
func (t *Tuning) CheckAndSetDefaults() error {
	if t.HeartbeatInterval == 0 {
		t.HeartbeatInterval = 5 * time.Second
	}
	if t.DownAfter == 0 {
		t.DownAfter = 3 * t.HeartbeatInterval
	}
	if t.EnvelopeTTL == 0 {
		t.EnvelopeTTL = 5 * time.Minute
	}
	if t.TaskDeadline == 0 {
		t.TaskDeadline = 15 * time.Minute
	}
	if t.DeliveryTimeout == 0 {
		t.DeliveryTimeout = 5 * time.Second
	}
	if t.ReportMaxAge <= 0 {
		t.ReportMaxAge = 2 * time.Minute
	}
	return nil
}
