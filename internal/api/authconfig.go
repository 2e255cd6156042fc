package api

import "context"

// AuthConfigResponse lists the login methods a server accepts.
type AuthConfigResponse struct {
	// Password is true when local email and password login (auth.login)
	// is enabled.
	Password bool `json:"password"`
	// OIDC, when set, is the identity provider whose ID tokens
	// auth.exchange accepts.
	OIDC *OIDCProvider `json:"oidc,omitempty"`
}

// OIDCProvider is what a public client needs to log in with an identity
// provider: the rest comes from the issuer's discovery document.
type OIDCProvider struct {
	Issuer   string   `json:"issuer"`
	ClientID string   `json:"client_id"`
	Scopes   []string `json:"scopes"`
}

// AuthConfig asks the server how to log in.
func (c *Client) AuthConfig(ctx context.Context) (*AuthConfigResponse, error) {
	return Do(ctx, c, OpAuthConfig, Empty{})
}
