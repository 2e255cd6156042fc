package term

import (
	"errors"

	"github.com/gpuaas/gpuaas/hostd/env"
)

// Reasons a connection, channel or request is refused. They are logged;
// the client is told as little as SSH allows (a failed authentication, a
// rejected channel, a false reply).
var (
	// ErrNotReady: the node has no id yet (not enrolled) or no ticket CA
	// keys from controld.
	ErrNotReady = errors.New("terminal: not ready (no node id or no ticket CA keys yet)")
	// ErrWrongUser: the SSH user is not the ticket's POSIX user, or the
	// POSIX user is not the allocation's.
	ErrWrongUser = errors.New("terminal: user does not match the ticket")
	// ErrReplayed: the ticket's serial was already used.
	ErrReplayed = errors.New("terminal: ticket already used")
	// ErrBadTicket: the ticket names an allocation or user hostd cannot
	// act on (not a valid id or POSIX name).
	ErrBadTicket = errors.New("terminal: ticket names an invalid allocation or user")
	// ErrNoAccount: no such POSIX user on this node (or a system account).
	ErrNoAccount = errors.New("terminal: no such account")
	// ErrNotProvisioned: the allocation has no VM key on this node.
	ErrNotProvisioned = env.ErrNotProvisioned
	// ErrHostKeyChanged: the VM presented a host key other than the one
	// pinned on the first hop.
	ErrHostKeyChanged = env.ErrHostKeyChanged
	// ErrForwardDenied: direct-tcpip to a destination the policy refuses,
	// or without the permit-port-forwarding extension.
	ErrForwardDenied = errors.New("terminal: port forwarding refused")
	// ErrNoSFTPServer: a real account asked for sftp and no sftp-server
	// binary is installed.
	ErrNoSFTPServer = env.ErrNoSFTPServer
)
