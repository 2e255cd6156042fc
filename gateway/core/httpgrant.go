package core

import (
	"context"
	"errors"
	"fmt"

	"github.com/gpuaas/gpuaas/internal/gateproto"
)

// HTTPGrant is a grant the HTTPS front makes from a request rather than
// from an SSH certificate: controld decides on the exposure's host name
// and the request's credential (gate.authorize_http), with the rules and
// revocation of gate.authorize, and hands back a ticket the same way.
type HTTPGrant struct {
	// Host is the exposure's first host label, "<port>-<allocation>".
	Host string
	// Bearer is a session or machine token from `Authorization: Bearer`.
	Bearer string
	// SessionID and UserID are the login a front cookie is bound to.
	SessionID, UserID string
}

// ErrHTTPDenied is returned by Authorize (and OpenPort) when controld's
// verdict on an HTTP grant is not allow; the *HTTPDenied it wraps says
// which verdict.
var ErrHTTPDenied = errors.New("the request is not allowed")

// HTTPDenied is a verdict other than allow.
type HTTPDenied struct {
	Verdict, Reason string
}

func (d *HTTPDenied) Error() string { return d.Verdict + ": " + d.Reason }

// Unwrap lets errors.Is find ErrHTTPDenied.
func (d *HTTPDenied) Unwrap() error { return ErrHTTPDenied }

// authorizeHTTP asks gate.authorize_http for g's verdict with a ticket for
// ticketKey, and returns the gate.authorize-shaped answer the dial needs
// and the login controld allowed (zero for an anonymous request).
func (c *Core) authorizeHTTP(ctx context.Context, g Grant, ticketKey string) (*gateproto.GateAuthorizeResponse, gateproto.GateSession, error) {
	v, err := gateproto.GateAuthorizeHTTP(ctx, c.cfg.Client, gateproto.GateAuthorizeHTTPRequest{Host: g.HTTP.Host,
		Bearer: g.HTTP.Bearer, SessionID: g.HTTP.SessionID, UserID: g.HTTP.UserID, TicketKey: ticketKey})
	if err != nil {
		return nil, gateproto.GateSession{}, err
	}
	if v.Verdict != gateproto.VerdictAllow {
		return nil, gateproto.GateSession{}, &HTTPDenied{Verdict: v.Verdict, Reason: v.Reason}
	}
	if v.Auth == nil {
		return nil, gateproto.GateSession{}, fmt.Errorf("controld allowed %s without a ticket", g.HTTP.Host)
	}
	return v.Auth, gateproto.GateSession{SessionID: v.SessionID, UserID: v.UserID}, nil
}
