package api

import "context"

// Endpoints of tokens for machines (docs/tokens.md). Each is declared
// here once (endpoint.go, docs/decisions/0013-endpoint-descriptors.md).
const (
	EndpointTokenCreate = "token.create"
	EndpointTokenList   = "token.list"
	EndpointTokenRevoke = "token.revoke"
)

var (
	// OpTokenCreate is token.create: makes a token acting with a role
	// (member or viewer) in one project the caller owns, for a TTL, and
	// returns its secret, which is shown once and stored only as a hash.
	OpTokenCreate = NewSecretMutation[TokenCreateRequest, TokenCreateResponse](EndpointTokenCreate, LoggedIn)
	// OpTokenList is token.list: lists a project's tokens (its owners and
	// admins), without their secrets.
	OpTokenList = NewQuery[TokenListRequest, TokenListResponse](EndpointTokenList, LoggedIn)
	// OpTokenRevoke is token.revoke: ends a token at once, on every
	// replica; a project owner or an admin may revoke any of the
	// project's tokens.
	OpTokenRevoke = NewMutation[TokenRevokeRequest, Token](EndpointTokenRevoke, LoggedIn)
)

// TokenCreate creates a token.
func (c *Client) TokenCreate(ctx context.Context, req TokenCreateRequest, opts ...CallOption) (*TokenCreateResponse, error) {
	return Do(ctx, c, OpTokenCreate, req, opts...)
}

// TokenList lists a project's tokens.
func (c *Client) TokenList(ctx context.Context, req TokenListRequest) (*TokenListResponse, error) {
	return Do(ctx, c, OpTokenList, req)
}

// TokenRevoke revokes a token.
func (c *Client) TokenRevoke(ctx context.Context, req TokenRevokeRequest, opts ...CallOption) (*Token, error) {
	return Do(ctx, c, OpTokenRevoke, req, opts...)
}
