// Package gateproto is the gateway protocol: what sshgate and the HTTPS
// front (role gateway) ask controld, the login they get their service
// token with, and the subjects controld tells them about revoked sessions
// and allocation notices on. Not for users: every endpoint but gate.login
// is GatewayOnly. Each endpoint is declared here once with internal/api's
// descriptor machinery: its name (api.Subject(name) is its subject; audit
// rows and logs name it so) and its descriptor, with its request and
// response types, access level and kind (docs/decisions/0013-endpoint-
// descriptors.md, docs/decisions/0065-one-wire-package-per-protocol.md).
package gateproto

import (
	"context"

	"github.com/gpuaas/gpuaas/internal/api"
)

// Endpoints of the gateway protocol: what sshgate (role gateway) asks
// controld, and the login it gets its service token with. Not for users:
// every one but gate.login is api.GatewayOnly. Each is declared here once: its
// name (Subject(name) is its subject; audit rows and logs name it so) and
// its descriptor, with its request and response types, access level and
// kind (endpoint.go, docs/decisions/0013-endpoint-descriptors.md).
const (
	EndpointGateActivity     = "gate.activity"
	EndpointGateAuthorize    = "gate.authorize"
	EndpointGateCredentials  = "gate.credentials"
	EndpointGateHostCert     = "gate.host_cert"
	EndpointGateLogin        = "gate.login"
	EndpointGateSessions     = "gate.sessions"
	EndpointGateUserToken    = "gate.user_token"
	EndpointGateVolumeEnd    = "gate.volume_end"
	EndpointSessionEnd       = "session.end"
	EndpointSessionInterrupt = "session.interrupt"
	EndpointSessionStart     = "session.start"
	// EndpointGateAuthorizeHTTP is the HTTPS front's authorization of a
	// request for an exposure (docs/expose.md).
	EndpointGateAuthorizeHTTP = "gate.authorize_http"
	EndpointGateRedeemLink    = "gate.redeem_link"
)

var (
	// OpGateActivity is gate.activity: reports allocation activity (gateways
	// only).
	OpGateActivity = api.NewQuery[GateActivityRequest, GateActivityResponse](EndpointGateActivity, api.GatewayOnly)
	// OpGateAuthorize is gate.authorize: asks whether a user may open an
	// allocation and, if so, for a one-minute ticket for req.TicketKey
	// (gateway principals only).
	OpGateAuthorize = api.NewQuery[GateAuthorizeRequest, GateAuthorizeResponse](EndpointGateAuthorize, api.GatewayOnly)
	// OpGateCredentials is gate.credentials: asks for a gateway certificate
	// (gateway only).
	OpGateCredentials = api.NewQuery[GateCredentialsRequest, GateCredentialsResponse](EndpointGateCredentials, api.GatewayOnly)
	// OpGateHostCert is gate.host_cert: has the host CA sign the gateway's
	// host key for req.Principals, valid for 30 days (gateway principals
	// only).
	OpGateHostCert = api.NewQuery[GateHostCertRequest, api.SSHCertResponse](EndpointGateHostCert, api.GatewayOnly)
	// OpGateLogin is gate.login: a registered gateway's short-lived session
	// token for a login assertion signed with its key (the one public gate.*
	// endpoint; the token is a secret, never replayed).
	OpGateLogin = api.NewSecretMutation[GateLoginRequest, api.LoginResponse](EndpointGateLogin, api.Public)
	// OpGateSessions is gate.sessions: asks which of req.Sessions have ended
	// (gateway principals only): logged out, disabled, expired or unknown.
	OpGateSessions = api.NewQuery[GateSessionsRequest, GateSessionsResponse](EndpointGateSessions, api.GatewayOnly)
	// OpGateUserToken is gate.user_token: exchanges the user certificate a
	// client authenticated to the gateway with for a short-lived, delegated
	// session token acting as that user (gateway principals only).
	OpGateUserToken = api.NewQuery[GateUserTokenRequest, GateUserTokenResponse](EndpointGateUserToken, api.GatewayOnly)
	// OpGateVolumeEnd is gate.volume_end: ends the hold gate.authorize put
	// on a volume for an sftp session, once the session's link to the node
	// is closed (gateway principals only; audited as volume.session_end).
	OpGateVolumeEnd = api.NewQuery[GateVolumeEndRequest, GateVolumeEndResponse](EndpointGateVolumeEnd, api.GatewayOnly)
	// OpSessionEnd is session.end: records how a terminal session ended
	// (gateway only).
	OpSessionEnd = api.NewMutation[SessionEndRequest, api.TerminalSession](EndpointSessionEnd, api.GatewayOnly)
	// OpSessionInterrupt is session.interrupt: marks the sessions the named
	// gateway left running as interrupted (gateway only), as it starts again
	// after a crash.
	OpSessionInterrupt = api.NewMutation[SessionInterruptRequest, SessionInterruptResponse](EndpointSessionInterrupt, api.GatewayOnly)
	// OpSessionStart is session.start: indexes a terminal session as it opens
	// (gateway only).
	OpSessionStart = api.NewMutation[SessionStartRequest, api.TerminalSession](EndpointSessionStart, api.GatewayOnly)
	// OpGateAuthorizeHTTP is gate.authorize_http: the gateway asks whether a
	// request for an exposure's host name may pass with the caller's
	// credential (a session or machine token, the login a front cookie is
	// bound to, or none for public exposures), with the same rules and
	// revocation as SSH, and for a ticket to dial the allocation's node
	// (gateway principals only; the bearer travels to controld alone).
	OpGateAuthorizeHTTP = api.NewQuery[GateAuthorizeHTTPRequest, GateAuthorizeHTTPResponse](EndpointGateAuthorizeHTTP, api.GatewayOnly)
	// OpGateRedeemLink is gate.redeem_link: the front redeems a one-time
	// link's code, once, on the exposure it was minted for (gateway
	// principals only).
	OpGateRedeemLink = api.NewQuery[GateRedeemLinkRequest, GateRedeemLinkResponse](EndpointGateRedeemLink, api.GatewayOnly)
)

// The calls below are the gateway's side of each endpoint: api.Do with its
// descriptor, on the gateway's client.

// GateActivity reports allocation activity (gateways only).
func GateActivity(ctx context.Context, c *api.Client, req GateActivityRequest) (*GateActivityResponse, error) {
	return api.Do(ctx, c, OpGateActivity, req)
}

// GateAuthorize asks whether a user may open an allocation and, if so, for
// a one-minute ticket for req.TicketKey (gateway principals only). Each
// call is audited; a retry simply mints a fresh ticket.
func GateAuthorize(ctx context.Context, c *api.Client, req GateAuthorizeRequest) (*GateAuthorizeResponse, error) {
	return api.Do(ctx, c, OpGateAuthorize, req)
}

// GateAuthorizeHTTP asks controld for the verdict on an HTTPS request.
func GateAuthorizeHTTP(ctx context.Context, c *api.Client, req GateAuthorizeHTTPRequest) (*GateAuthorizeHTTPResponse, error) {
	return api.Do(ctx, c, OpGateAuthorizeHTTP, req)
}

// GateCredentials asks for a gateway certificate (gateway only).
func GateCredentials(ctx context.Context, c *api.Client, req GateCredentialsRequest) (*GateCredentialsResponse, error) {
	return api.Do(ctx, c, OpGateCredentials, req)
}

// GateHostCert has the host CA sign the gateway's host key for
// req.Principals, valid for 30 days (gateway principals only).
func GateHostCert(ctx context.Context, c *api.Client, req GateHostCertRequest) (*api.SSHCertResponse, error) {
	return api.Do(ctx, c, OpGateHostCert, req)
}

// GateRedeemLink redeems a one-time link's code.
func GateRedeemLink(ctx context.Context, c *api.Client, req GateRedeemLinkRequest) (*GateRedeemLinkResponse, error) {
	return api.Do(ctx, c, OpGateRedeemLink, req)
}

// GateSessions asks which of req.Sessions have ended (gateway principals
// only): logged out, disabled, expired or unknown.
func GateSessions(ctx context.Context, c *api.Client, req GateSessionsRequest) (*GateSessionsResponse, error) {
	return api.Do(ctx, c, OpGateSessions, req)
}

// GateUserToken exchanges the user certificate a client authenticated to
// the gateway with for a short-lived, delegated session token acting as
// that user (gateway principals only). Each call is audited.
func GateUserToken(ctx context.Context, c *api.Client, req GateUserTokenRequest) (*GateUserTokenResponse, error) {
	return api.Do(ctx, c, OpGateUserToken, req)
}

// GateVolumeEnd ends the hold gate.authorize put on a volume for a
// session (gateway principals only).
func GateVolumeEnd(ctx context.Context, c *api.Client, req GateVolumeEndRequest) (*GateVolumeEndResponse, error) {
	return api.Do(ctx, c, OpGateVolumeEnd, req)
}

// SessionEnd records how a terminal session ended (gateway only).
func SessionEnd(ctx context.Context, c *api.Client, req SessionEndRequest, opts ...api.CallOption) (*api.TerminalSession, error) {
	return api.Do(ctx, c, OpSessionEnd, req, opts...)
}

// SessionInterrupt marks the sessions the named gateway left running as
// interrupted (gateway only), as it starts again after a crash.
func SessionInterrupt(ctx context.Context, c *api.Client, req SessionInterruptRequest, opts ...api.CallOption) (*SessionInterruptResponse, error) {
	return api.Do(ctx, c, OpSessionInterrupt, req, opts...)
}

// SessionStart indexes a terminal session as it opens (gateway only).
func SessionStart(ctx context.Context, c *api.Client, req SessionStartRequest, opts ...api.CallOption) (*api.TerminalSession, error) {
	return api.Do(ctx, c, OpSessionStart, req, opts...)
}

// Front is the HTTPS front's view of controld (gateway/httpfront's
// Verdicts and Links): the gateway's client, with gate.authorize_http and
// gate.redeem_link as methods so the front can be tested with its own.
type Front struct {
	Client *api.Client
}

// GateAuthorizeHTTP asks controld for the verdict on an HTTPS request.
func (f Front) GateAuthorizeHTTP(ctx context.Context, req GateAuthorizeHTTPRequest) (*GateAuthorizeHTTPResponse, error) {
	return GateAuthorizeHTTP(ctx, f.Client, req)
}

// GateRedeemLink redeems a one-time link's code.
func (f Front) GateRedeemLink(ctx context.Context, req GateRedeemLinkRequest) (*GateRedeemLinkResponse, error) {
	return GateRedeemLink(ctx, f.Client, req)
}
