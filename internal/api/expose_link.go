package api

import "time"

// LinkTTL is how long a one-time link may wait to be opened.
const LinkTTL = time.Minute

// LinkPath is the path on an exposure's host that redeems a one-time link
// (?code=...).
const LinkPath = "/.gpuaas/login"

// ExposeLinkRequest asks for a one-time link into the exposure Host
// ("<port>-<allocation>") that lands on Path ("/" when empty; a path on
// the exposure's own host, never another site).
type ExposeLinkRequest struct {
	Host string `json:"host"`
	Path string `json:"path,omitempty"`
}

// ExposeLinkResponse is the code to open as
// https://<host>.<apps domain>/.gpuaas/login?code=<Code> before ExpiresAt.
type ExposeLinkResponse struct {
	Code      string    `json:"code"`
	ExpiresAt time.Time `json:"expires_at"`
}
