package gateproto

import (
	"time"

	"github.com/gpuaas/gpuaas/internal/api"
)

// Verdicts of gate.authorize_http: what the HTTPS front answers a request
// for an exposure (docs/expose.md).
const (
	// VerdictAllow: proxy the request.
	VerdictAllow = "allow"
	// VerdictLogin: the exposure needs a login the request lacks (or
	// whose login ended): 401, and a page saying `gpuaas open URL`.
	VerdictLogin = "login"
	// VerdictForbidden: logged in, but not someone it is shared with: 403.
	VerdictForbidden = "forbidden"
	// VerdictNotFound: no exposure of that host name ever was: 404.
	VerdictNotFound = "not_found"
	// VerdictGone: it was, and ended (removed, expired, its allocation
	// released or no longer active): 410.
	VerdictGone = "gone"
)

// MaxHTTPVerdictCache is how long the front may keep a verdict before it
// asks again: logout, a disabled account, a release or an expiry end
// access within it (a session.revoked event drops the verdicts of that
// session at once).
const MaxHTTPVerdictCache = 3 * time.Second

// GateAuthorizeHTTPRequest asks whether a request for the exposure Host
// ("<port>-<allocation>", the first label of its host name) may pass, on
// the strength of the caller's credential: Bearer (a session token or a
// machine token, from `Authorization: Bearer`), or the login session a
// cookie the front signed is bound to (SessionID and UserID), or nothing
// (public exposures). With TicketKey (a fresh key the gateway just made)
// an allowed answer carries a ticket for the allocation's node.
type GateAuthorizeHTTPRequest struct {
	Host      string `json:"host"`
	Bearer    string `json:"bearer,omitempty"`
	SessionID string `json:"session_id,omitempty"`
	UserID    string `json:"user_id,omitempty"`
	TicketKey string `json:"ticket_key,omitempty"` // authorized_keys format
}

// GateAuthorizeHTTPResponse is the verdict. UserID and SessionID name the
// login the request was allowed on ("" for an anonymous request to a
// public exposure): the front ends its streams when that login ends.
type GateAuthorizeHTTPResponse struct {
	Verdict  string        `json:"verdict"`
	Reason   string        `json:"reason,omitempty"`
	Exposure *api.Exposure `json:"exposure,omitempty"`
	UserID   string        `json:"user_id,omitempty"`
	// SessionID is the login session (or machine token) allowed.
	SessionID string `json:"session_id,omitempty"`
	// CacheUntil is the latest the front may reuse the verdict: at most
	// MaxHTTPVerdictCache, never past the exposure's expiry.
	CacheUntil time.Time `json:"cache_until"`
	// Auth is where to dial the node and with what ticket: an allowed
	// answer to a request with TicketKey.
	Auth *GateAuthorizeResponse `json:"auth,omitempty"`
}

// GateRedeemLinkRequest redeems a one-time link's code on the exposure
// Host it was opened on.
type GateRedeemLinkRequest struct {
	Host string `json:"host"`
	Code string `json:"code"`
}

// GateRedeemLinkResponse is the login the front's cookie is bound to, and
// where to go.
type GateRedeemLinkResponse struct {
	UserID    string `json:"user_id"`
	SessionID string `json:"session_id"`
	Path      string `json:"path"`
}
