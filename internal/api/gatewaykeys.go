package api

import (
	"context"
	"time"
)

// Gateway credentials: hostd's terminal server lets in only connections
// that first authenticate with a gateway certificate (internal CA, see
// sshcert.SignGateway), then with a ticket. sshgate gets its gateway
// certificate from controld for its long-lived gateway key, which an
// admin must have registered: a stolen gateway token alone cannot have a
// key of its own certified.
const (
	// EndpointGateCredentials certifies the calling gateway's registered
	// key as a short-lived gateway certificate (gateway only, audited).
	EndpointGateCredentials = "gate.credentials"
	// EndpointGatewayKeyAdd registers a gateway key (admins).
	EndpointGatewayKeyAdd = "ops.gateway_key_add"
	// EndpointGatewayKeyList lists gateway keys (operators).
	EndpointGatewayKeyList = "ops.gateway_key_list"
	// EndpointGatewayKeyRevoke stops certifying a gateway key (admins).
	EndpointGatewayKeyRevoke = "ops.gateway_key_revoke"
)

// GateCredentialsRequest asks for a gateway certificate for PublicKey.
type GateCredentialsRequest struct {
	PublicKey string `json:"public_key"` // authorized_keys format
}

// GateCredentialsResponse carries the gateway certificate.
type GateCredentialsResponse struct {
	Name        string    `json:"name"`        // the key's registered name
	Certificate string    `json:"certificate"` // authorized_keys format
	ValidBefore time.Time `json:"valid_before"`
}

// GatewayKey is a registered gateway key.
type GatewayKey struct {
	ID        string     `json:"id"` // SHA256 fingerprint
	Name      string     `json:"name"`
	PublicKey string     `json:"public_key"` // authorized_keys format
	CreatedBy string     `json:"created_by"`
	CreatedAt time.Time  `json:"created_at"`
	RevokedAt *time.Time `json:"revoked_at,omitempty"`
}

// GatewayKeyAddRequest registers PublicKey as the gateway Name.
type GatewayKeyAddRequest struct {
	Name      string `json:"name"`
	PublicKey string `json:"public_key"`
}

// GatewayKeyRef names a gateway key by fingerprint or name.
type GatewayKeyRef struct {
	Key string `json:"key"`
}

// GatewayKeyListRequest filters ops.gateway_key_list.
type GatewayKeyListRequest struct {
	Revoked bool `json:"revoked,omitempty"` // include revoked keys
}

// GatewayKeyListResponse lists gateway keys, newest first.
type GatewayKeyListResponse struct {
	Keys []GatewayKey `json:"keys"`
}

// GateCredentials has the internal CA certify the calling gateway's key
// (gateway principals only; the key must be registered).
func (c *Client) GateCredentials(ctx context.Context, req GateCredentialsRequest) (*GateCredentialsResponse, error) {
	var out GateCredentialsResponse
	return &out, c.Call(ctx, EndpointGateCredentials, req, &out)
}

// GatewayKeyAdd registers a gateway key (admins).
func (c *Client) GatewayKeyAdd(ctx context.Context, req GatewayKeyAddRequest, opts ...CallOption) (*GatewayKey, error) {
	var out GatewayKey
	return &out, c.Mutate(ctx, EndpointGatewayKeyAdd, req, &out, opts...)
}

// GatewayKeyList lists gateway keys (operators).
func (c *Client) GatewayKeyList(ctx context.Context, req GatewayKeyListRequest) (*GatewayKeyListResponse, error) {
	var out GatewayKeyListResponse
	return &out, c.Call(ctx, EndpointGatewayKeyList, req, &out)
}

// GatewayKeyRevoke stops certifying a gateway key (admins): the gateway
// gets no new certificate, and hostd refuses its current one when it
// expires (within sshcert.DefaultGatewayTTL).
func (c *Client) GatewayKeyRevoke(ctx context.Context, req GatewayKeyRef, opts ...CallOption) (*GatewayKey, error) {
	var out GatewayKey
	return &out, c.Mutate(ctx, EndpointGatewayKeyRevoke, req, &out, opts...)
}
