package api

import (
	"context"
	"time"
)

// Idle auto-release and maximum duration (docs/idle.md). A project may
// set an idle period (off by default); an allocation inherits it, or
// overrides it at create, and may set a maximum duration. Activity is
// measured at the gateway — channel data of any SSH session, sftp/scp
// subsystem or port forward of the allocation — and on its GPUs (hostd's
// hostproto.Heartbeat.GPUActive). SSH keep-alives (global and channel requests
// without channel data) are not activity. An allocation idle for its
// period is warned (EventAllocNotice, NoticeIdleWarning, in its open
// sessions too) and then released by system:idle with reason "idle"; one
// past its maximum duration is released with reason "max_duration",
// whatever its activity.
const (
	// EventProjectPolicy tells a project's members its policy changed; the
	// payload is the ProjectPolicy.
	EventProjectPolicy = "project.policy"
)

// PolicyOff turns idle release off (for an allocation: whatever its
// project says).
const PolicyOff = "off"

// Release reasons of the platform's idle and maximum-duration releases
// (the transition's reason, shown by `alloc get` and the timeline).
const (
	ReasonIdle        = "idle"
	ReasonMaxDuration = "max_duration"
)

// ProjectPolicyRequest sets a project's idle period: a Go duration ("2h",
// "30m") at least controld's minimum, or "off".
type ProjectPolicyRequest struct {
	Project          string `json:"project,omitempty"`
	IdleReleaseAfter string `json:"idle_release_after"`
}

// ProjectPolicy is a project's idle policy. IdleReleaseAfterSeconds 0 is
// off. UpdatedAt is when the period was last changed: the idle clock of
// the project's running allocations starts no earlier.
type ProjectPolicy struct {
	ProjectID               string    `json:"project_id"`
	Project                 string    `json:"project"`
	IdleReleaseAfterSeconds int64     `json:"idle_release_after_seconds"`
	UpdatedAt               time.Time `json:"updated_at"`
	// Affected are the project's running allocations that follow this
	// period (none of their own), in the reply to project.set_policy.
	Affected []PolicyAffected `json:"affected,omitempty"`
}

// PolicyAffected is a running allocation a project's idle period applies
// to, and when it will be warned and released if nobody uses it.
type PolicyAffected struct {
	AllocationID string    `json:"allocation_id"`
	WarnAt       time.Time `json:"warn_at"`
	ReleaseAt    time.Time `json:"release_at"`
}

// AllocPolicy is an allocation's effective idle and duration policy, as
// alloc.get shows it. Seconds of 0 are off.
type AllocPolicy struct {
	IdleReleaseAfterSeconds int64 `json:"idle_release_after_seconds"`
	// IdleFrom says where the idle period comes from: "allocation" (set at
	// create), "project", or "" when off everywhere.
	IdleFrom           string `json:"idle_from,omitempty"`
	MaxDurationSeconds int64  `json:"max_duration_seconds,omitempty"`
	// LastActiveAt is the last activity seen (gateway or GPU), if any.
	LastActiveAt *time.Time `json:"last_active_at,omitempty"`
	// IdleReleaseAt and MaxDurationAt are when it will be released if
	// nothing changes (active allocations only).
	IdleReleaseAt *time.Time `json:"idle_release_at,omitempty"`
	MaxDurationAt *time.Time `json:"max_duration_at,omitempty"`
}

// ProjectSetPolicy sets a project's idle policy.
func (c *Client) ProjectSetPolicy(ctx context.Context, req ProjectPolicyRequest, opts ...CallOption) (*ProjectPolicy, error) {
	return Do(ctx, c, OpProjectPolicy, req, opts...)
}
