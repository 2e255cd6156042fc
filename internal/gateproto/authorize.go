package gateproto

import (
	"time"

	"github.com/gpuaas/gpuaas/internal/api"
)

// GateAuthorizeRequest asks whether UserID may open AllocationID, and for
// a ticket for TicketKey (a fresh key the gateway just generated).
// Certificate is the user certificate the client authenticated to the
// gateway with: controld verifies it and refuses when the login session it
// names has ended.
type GateAuthorizeRequest struct {
	AllocationID string `json:"allocation_id"`
	// WorkloadID, instead of AllocationID, asks for a running workload's
	// container on its allocation (ssh <workload-id>@gateway, docs/apps.md).
	WorkloadID  string `json:"workload_id,omitempty"`
	UserID      string `json:"user_id"`
	TicketKey   string `json:"ticket_key"`  // authorized_keys format
	Certificate string `json:"certificate"` // authorized_keys format
}

// GateAuthorizeResponse says where to go and with what.
type GateAuthorizeResponse struct {
	AllocationID string `json:"allocation_id"`
	// WorkloadID is the workload asked for, whose container the ticket's
	// sessions run in; "" for the allocation itself.
	WorkloadID   string `json:"workload_id,omitempty"`
	NodeID       string `json:"node_id"`
	Shape        string `json:"shape"`
	PosixUser    string `json:"posix_user"`
	TerminalAddr string `json:"terminal_addr"`
	// TerminalHostKey is the host key the node's terminal server must
	// present (authorized_keys format).
	TerminalHostKey string    `json:"terminal_host_key"`
	Ticket          string    `json:"ticket"` // authorized_keys format certificate
	ValidBefore     time.Time `json:"valid_before"`
	// Banner is one line the gateway writes to the stderr of interactive
	// (pty) sessions before the shell: the allocation's cost so far, its
	// burn and the runway of the project's balance and budget.
	Banner string `json:"banner,omitempty"`
}

// GateUserTokenRequest asks for a delegated session for UserID, proven by
// the user certificate the client authenticated to the gateway with.
type GateUserTokenRequest struct {
	UserID      string `json:"user_id"`
	Certificate string `json:"certificate"` // authorized_keys format
}

// GateUserTokenResponse is api.LoginResponse: the delegated session's token
// lives until the certificate expires or 15 minutes, whichever is first.
type GateUserTokenResponse = api.LoginResponse

// MaxGateSessions bounds the sessions one gate.sessions request asks about.
const MaxGateSessions = 5000

// GateSessionsRequest lists login sessions the gateway has connections
// for, each with the user its certificate names.
type GateSessionsRequest struct {
	Sessions []GateSession `json:"sessions"`
}

// GateSession is one login session as a certificate names it.
type GateSession struct {
	SessionID string `json:"session_id"`
	UserID    string `json:"user_id"`
}

// Reasons a login session is no longer good for SSH.
const (
	SessionEndedRevoked = "revoked" // logged out, or the user was disabled
	SessionEndedExpired = "expired"
	SessionEndedUnknown = "unknown" // no such session for that user
)

// GateSessionsResponse lists those of the asked sessions that have ended;
// the others are live.
type GateSessionsResponse struct {
	Ended []GateSessionEnded `json:"ended"`
}

// GateSessionEnded is a session that no longer lets its certificates in.
type GateSessionEnded struct {
	GateSession
	Reason string `json:"reason"` // SessionEnded*
}

// GateHostCertRequest asks for a host certificate for the gateway.
type GateHostCertRequest struct {
	PublicKey  string   `json:"public_key"`
	Principals []string `json:"principals"`
}

// GateActivityRequest is a gateway's report of the last channel data of
// each allocation seen since its previous report.
type GateActivityRequest struct {
	LastActive map[string]time.Time `json:"last_active"`
}

// GateActivityResponse says how many allocations the report moved.
type GateActivityResponse struct {
	Recorded int `json:"recorded"`
}
