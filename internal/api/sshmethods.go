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
