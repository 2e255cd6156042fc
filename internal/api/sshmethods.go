package api

import "context"

// SSHCert has controld sign the caller's public key (authorized_keys
// format) as a user certificate that ends no later than the session.
func (c *Client) SSHCert(ctx context.Context, req SSHCertRequest, opts ...CallOption) (*SSHCertResponse, error) {
	return Do(ctx, c, OpSSHCert, req, opts...)
}

// SSHCAs returns the trusted CA keys and the gateway address. It needs no
// login; with a gateway's or operator's token it also lists the internal
// CA.
func (c *Client) SSHCAs(ctx context.Context) (*SSHCAsResponse, error) {
	return Do(ctx, c, OpSSHCAs, Empty{})
}

// GateAuthorize asks whether a user may open an allocation and, if so, for
// a one-minute ticket for req.TicketKey (gateway principals only). Each
// call is audited; a retry simply mints a fresh ticket.
func (c *Client) GateAuthorize(ctx context.Context, req GateAuthorizeRequest) (*GateAuthorizeResponse, error) {
	return Do(ctx, c, OpGateAuthorize, req)
}

// GateHostCert has the host CA sign the gateway's host key for
// req.Principals, valid for 30 days (gateway principals only).
func (c *Client) GateHostCert(ctx context.Context, req GateHostCertRequest) (*SSHCertResponse, error) {
	return Do(ctx, c, OpGateHostCert, req)
}

// GateUserToken exchanges the user certificate a client authenticated to
// the gateway with for a short-lived, delegated session token acting as
// that user (gateway principals only). Each call is audited.
func (c *Client) GateUserToken(ctx context.Context, req GateUserTokenRequest) (*GateUserTokenResponse, error) {
	return Do(ctx, c, OpGateUserToken, req)
}

// GateSessions asks which of req.Sessions have ended (gateway principals
// only): logged out, disabled, expired or unknown.
func (c *Client) GateSessions(ctx context.Context, req GateSessionsRequest) (*GateSessionsResponse, error) {
	return Do(ctx, c, OpGateSessions, req)
}

// SessionStart indexes a terminal session as it opens (gateway only).
func (c *Client) SessionStart(ctx context.Context, req SessionStartRequest, opts ...CallOption) (*TerminalSession, error) {
	return Do(ctx, c, OpSessionStart, req, opts...)
}

// SessionEnd records how a terminal session ended (gateway only).
func (c *Client) SessionEnd(ctx context.Context, req SessionEndRequest, opts ...CallOption) (*TerminalSession, error) {
	return Do(ctx, c, OpSessionEnd, req, opts...)
}

// SessionInterrupt marks the sessions the named gateway left running as
// interrupted (gateway only), as it starts again after a crash.
func (c *Client) SessionInterrupt(ctx context.Context, req SessionInterruptRequest, opts ...CallOption) (*SessionInterruptResponse, error) {
	return Do(ctx, c, OpSessionInterrupt, req, opts...)
}

// SessionList lists the caller's terminal sessions (operators: everyone's),
// newest first.
func (c *Client) SessionList(ctx context.Context, req SessionListRequest) (*SessionListResponse, error) {
	return Do(ctx, c, OpSessionList, req)
}

// SessionGet returns one terminal session.
func (c *Client) SessionGet(ctx context.Context, id string) (*TerminalSession, error) {
	return Do(ctx, c, OpSessionGet, SessionRef{ID: id})
}

// CARotate adds a key to a CA (admins); see CARotateRequest.
func (c *Client) CARotate(ctx context.Context, req CARotateRequest, opts ...CallOption) (*CAListResponse, error) {
	return Do(ctx, c, OpCARotate, req, opts...)
}

// CARetire stops trusting a CA key (admins): certificates it signed are
// refused from then on.
func (c *Client) CARetire(ctx context.Context, req CARotateRequest, opts ...CallOption) (*CAListResponse, error) {
	return Do(ctx, c, OpCARetire, req, opts...)
}

// CAList lists CA keys (operators).
func (c *Client) CAList(ctx context.Context, req CAListRequest) (*CAListResponse, error) {
	return Do(ctx, c, OpCAList, req)
}

// GateVolumeEnd ends the hold gate.authorize put on a volume for a
// session (gateway principals only).
func (c *Client) GateVolumeEnd(ctx context.Context, req GateVolumeEndRequest) (*GateVolumeEndResponse, error) {
	return Do(ctx, c, OpGateVolumeEnd, req)
}
