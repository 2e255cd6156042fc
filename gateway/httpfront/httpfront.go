// Package httpfront is the gateway's HTTPS front
// (docs/expose.md, docs/decisions/0012-gateway-rooms.md):
// https://<port>-<allocation>.<apps domain> reaches a port on the
// allocation's loopback through the same core as the SSH front. It
// terminates TLS, finds the exposure by host name, asks controld for a
// verdict on the request's credential (gate.authorize_http: a bearer, or
// the login its cookie is bound to, or none for public exposures), and
// proxies the request over a stream the core opens to the node
// (Core.OpenPort), flushing as it goes so server-sent events and
// WebSockets pass unbuffered.
//
// The front speaks no SSH: it imports no SSH package (a layout test in
// gateway/ checks it); the core's Link and its SSH connection layer stay
// behind Core.
package httpfront

import (
	"context"
	"io"

	"github.com/gpuaas/gpuaas/gateway/core"
	"github.com/gpuaas/gpuaas/internal/gateproto"
)

// Core is what the HTTPS front needs of the gateway core; *core.Core
// implements it.
type Core interface {
	// OpenPort authorizes the grant (for this front, controld's
	// gate.authorize_http and ticket), dials the node over the gateway
	// link and opens a TCP stream to port on the allocation's loopback.
	// Data on the stream counts as the allocation's activity (idle
	// release).
	OpenPort(ctx context.Context, g core.Grant, port uint16) (io.ReadWriteCloser, error)
	// Track registers a request of the allocation for activity for as
	// long as it runs (a request that moves no stream data, a WebSocket
	// kept open); nil Notifier: HTTP responses get no notices.
	Track(alloc string, n core.Notifier) *core.Tracked
	// AddLogin registers a request in flight under a login, so that the
	// login's end (logout, a disabled account) ends it.
	AddLogin(l core.Login) (remove func())
}

// The core satisfies the front's contract.
var _ Core = (*core.Core)(nil)

// Verdicts is how the front asks controld about a request;
// gateproto.Front implements it.
type Verdicts interface {
	GateAuthorizeHTTP(ctx context.Context, req gateproto.GateAuthorizeHTTPRequest) (*gateproto.GateAuthorizeHTTPResponse, error)
}

var _ Verdicts = gateproto.Front{}
