package env

import (
	"errors"

	"github.com/gpuaas/gpuaas/internal/sshwire"
)

// Errors of environments.
var (
	// ErrNotProvisioned: the allocation has no VM key on this node.
	ErrNotProvisioned = errors.New("terminal: allocation has no VM on this node")
	// ErrHostKeyChanged: the VM presented a host key other than the one
	// pinned on the first hop.
	ErrHostKeyChanged = errors.New("terminal: VM host key changed")
	// ErrNoSFTPServer: a real account asked for sftp and no sftp-server
	// binary is installed.
	ErrNoSFTPServer = errors.New("terminal: no sftp-server on this node")
	// ErrUnsupported: the environment cannot do this (yet); wrapped with
	// the operation's name.
	ErrUnsupported = errors.New("environment: not supported")
	// ErrInvalidSpec: an ExecSpec or Mount that cannot be acted on.
	ErrInvalidSpec = errors.New("environment: invalid request")
	// ErrNotLoopback: DialLoopback was asked for another host
	// (sshwire's loopback policy).
	ErrNotLoopback = sshwire.ErrNotLoopback
	// ErrNoPTY: Resize of a process without a terminal.
	ErrNoPTY = errors.New("environment: process has no terminal")
)
