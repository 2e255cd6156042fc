// Package httpfront will be the gateway's HTTPS front:
// https://<port>-<allocation>.<apps-domain> reaching a port on the
// allocation's loopback through the same core as the SSH front
// (docs/decisions/0012-gateway-rooms.md). NOTHING HERE SERVES HTTP YET:
// the server, TLS, the host-name scheme, how a browser user is
// authenticated and the share levels are a later issue. What the package
// holds today is the contract that front needs from the core, checked at
// compile time, so the core cannot drift away from it.
//
// The front speaks no SSH: it imports no SSH package (a layout test in
// gateway/ checks it); the core's Link and its SSH connection layer stay
// behind Core.
package httpfront

import (
	"context"
	"io"

	"github.com/gpuaas/gpuaas/gateway/core"
)

// Core is what the HTTPS front needs of the gateway core; *core.Core
// implements it.
type Core interface {
	// OpenPort authorizes the grant's user for the allocation (controld's
	// gate.authorize and ticket), dials the node over the gateway link and
	// opens a TCP stream to port on the allocation's loopback. Data on the
	// stream counts as the allocation's activity (idle release).
	OpenPort(ctx context.Context, g core.Grant, port uint16) (io.ReadWriteCloser, error)
	// Track registers a request of the allocation for activity for as
	// long as it runs (a request that moves no stream data, a WebSocket
	// kept open); nil Notifier: HTTP responses get no notices.
	Track(alloc string, n core.Notifier) *core.Tracked
}

// The core satisfies the front's contract.
var _ Core = (*core.Core)(nil)
