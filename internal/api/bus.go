package api

import (
	"context"
	"time"
)

// Kinds of registered NATS identities (nkeys whose seeds stay with the
// service that uses them).
const (
	// BusIdentityGateway is an sshgate.
	BusIdentityGateway = "gateway"
	// BusIdentityOperator is an operator's natscli: read-only monitoring
	// of the NATS servers.
	BusIdentityOperator = "operator"
)

// Event kinds of registered NATS identities.
const (
	EventBusIdentity = "bus.identity"
	// EventBusIdentityRevoked has controld close the revoked keys'
	// connections (a BusIdentityRevokeResponse payload).
	EventBusIdentityRevoked = "bus.identity_revoked"
)

// BusIdentity is a registered NATS identity.
type BusIdentity struct {
	PublicKey string     `json:"public_key"`
	Kind      string     `json:"kind"`
	Name      string     `json:"name"`
	CreatedBy string     `json:"created_by"`
	CreatedAt time.Time  `json:"created_at"`
	RevokedAt *time.Time `json:"revoked_at,omitempty"`
}

// BusIdentityAddRequest registers a public key; the seed never travels.
type BusIdentityAddRequest struct {
	PublicKey string `json:"public_key"`
	Kind      string `json:"kind"`
	Name      string `json:"name"`
}

// BusIdentityRevokeRequest revokes a key (or every key of a name) and
// closes its connections.
type BusIdentityRevokeRequest struct {
	PublicKey string `json:"public_key,omitempty"`
	Name      string `json:"name,omitempty"`
}

// BusIdentityRevokeResponse lists what was revoked.
type BusIdentityRevokeResponse struct {
	Revoked []BusIdentity `json:"revoked"`
}

// BusIdentityAdd registers a NATS identity's public key (admins).
func (c *Client) BusIdentityAdd(ctx context.Context, req BusIdentityAddRequest, opts ...CallOption) (*BusIdentity, error) {
	return Do(ctx, c, OpBusIdentityAdd, req, opts...)
}

// BusIdentityList lists registered NATS identities, revoked ones too
// (admins).
func (c *Client) BusIdentityList(ctx context.Context) ([]BusIdentity, error) {
	out, err := Do(ctx, c, OpBusIdentityList, Empty{})
	return *out, err
}

// BusIdentityRevoke revokes a key or every key of a name and closes their
// connections (admins).
func (c *Client) BusIdentityRevoke(ctx context.Context, req BusIdentityRevokeRequest, opts ...CallOption) (*BusIdentityRevokeResponse, error) {
	return Do(ctx, c, OpBusIdentityRevoke, req, opts...)
}
