package api

import (
	"time"
)

// EnrollTokenRequest asks for a one-time enrollment token (operators).
type EnrollTokenRequest struct {
	Name  string `json:"name"`
	Shape string `json:"shape"`
	// Test enrolls a test node, whose slices may report simulated GPUs
	// (DriverCheck): `gpuaas node enroll --test-node`, and `gpuaas dev`.
	Test bool `json:"test,omitempty"`
}

// EnrollTokenResponse carries the token; it is shown once.
type EnrollTokenResponse struct {
	Name      string    `json:"name"`
	Shape     string    `json:"shape"`
	Token     string    `json:"token"`
	ExpiresAt time.Time `json:"expires_at"`
}

// Phase statuses of progress reports.
const (
	PhaseStarted = "started"
	PhaseDone    = "done"
	PhaseFailed  = "failed"
	PhaseCleanup = "cleanup"
)

// PhaseTiming is one step of an allocation's provisioning timeline.
type PhaseTiming struct {
	Task string `json:"task"` // the task's type
	// TaskID and PhaseSeq place the step: the task's steps are numbered
	// from 1, in the order they happened.
	TaskID    string    `json:"task_id,omitempty"`
	PhaseSeq  int       `json:"phase_seq,omitempty"`
	Phase     string    `json:"phase"`
	Status    string    `json:"status"`
	At        time.Time `json:"at"`
	ElapsedMS int64     `json:"elapsed_ms"`
	Message   string    `json:"message,omitempty"`
}

// PosixUser is the POSIX account an allocation's user gets on the host or
// in the VM: derived from the allocation id so it is unique per host.
func PosixUser(allocationID string) string {
	if len(allocationID) > 2 && allocationID[1] == '-' {
		return "g" + allocationID[2:]
	}
	return "g" + allocationID
}

// EventAllocProgress is the kind of a provisioning or release progress
// event.
const EventAllocProgress = "alloc.progress"

// AllocProgress is the payload of an alloc.progress event. The events of
// a task come in PhaseSeq order, each once: 1, 2, 3...
type AllocProgress struct {
	AllocationID string    `json:"allocation_id"`
	TaskID       string    `json:"task_id"`
	Task         string    `json:"task,omitempty"` // the task's type
	PhaseSeq     int       `json:"phase_seq,omitempty"`
	Phase        string    `json:"phase"`
	Status       string    `json:"status"`
	ElapsedMS    int64     `json:"elapsed_ms"`
	Message      string    `json:"message,omitempty"`
	At           time.Time `json:"at"`
}
