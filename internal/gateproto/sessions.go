package gateproto

import "github.com/gpuaas/gpuaas/internal/api"

// SessionStartRequest indexes a session as the gateway opens it. controld
// assigns the id; Recording may be given now or at the end.
type SessionStartRequest struct {
	UserID       string `json:"user_id"`
	AllocationID string `json:"allocation_id"`
	Kind         string `json:"kind"`
	Command      string `json:"command,omitempty"`
	Recording    string `json:"recording,omitempty"`
	Gateway      string `json:"gateway,omitempty"`
}

// SessionEndRequest closes a session's index entry. Ending a session that
// has already ended returns it unchanged.
type SessionEndRequest struct {
	ID         string `json:"id"`
	Bytes      int64  `json:"bytes"`
	ExitStatus *int   `json:"exit_status,omitempty"`
	Recording  string `json:"recording,omitempty"`
	// RecordingChunks is how many chunks the gateway wrote of Recording
	// (internal/recstore): controld reads them back and seals them.
	RecordingChunks int `json:"recording_chunks,omitempty"`
	// Interrupted ends the session as SessionInterrupted: its gateway
	// crashed and recovered what it had recorded.
	Interrupted bool `json:"interrupted,omitempty"`
}

// SessionInterruptRequest names the gateway instance whose sessions still
// running were cut by its crash.
type SessionInterruptRequest struct {
	Gateway string `json:"gateway"`
}

// SessionInterruptResponse lists the sessions marked interrupted.
type SessionInterruptResponse struct {
	Sessions []api.TerminalSession `json:"sessions"`
}

// GateVolumeEndRequest ends the hold gate.authorize put on a volume for
// the ticket key TicketKey (the same authorized_keys line).
type GateVolumeEndRequest struct {
	VolumeID  string `json:"volume_id"`
	TicketKey string `json:"ticket_key"`
}

// GateVolumeEndResponse says whether the hold was still there to end.
type GateVolumeEndResponse struct {
	Released bool `json:"released"`
}

// GateRevokedSubject is where controld tells every sshgate which sessions
// were revoked (a SessionRevoked body). Only controld may publish to it.
const GateRevokedSubject = "gpuaas.gate.revoked"

// GateNoticeSubject is where controld's event fan-out hands every
// EventAllocNotice (an Event body) to the sshgates, which write its
// message into the allocation's open sessions. Only controld may publish
// to it; only gateways may subscribe.
const GateNoticeSubject = "gpuaas.gate.notice"
