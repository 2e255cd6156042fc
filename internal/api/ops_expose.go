package api

import "context"

// Endpoint names of exposures: an allocation's ports served over HTTPS
// through the gateway (docs/expose.md).
const (
	EndpointExposeCreate = "expose.create"
	EndpointExposeList   = "expose.list"
	EndpointExposeRemove = "expose.rm"
	// EndpointGateAuthorizeHTTP is the HTTPS front's authorization of a
	// request for an exposure.
	EndpointGateAuthorizeHTTP = "gate.authorize_http"
)

var (
	// OpExposeCreate is expose.create: a project's owner or member serves a
	// port of an active allocation of the project over HTTPS, to themselves,
	// the project's members or the public, until its TTL runs out.
	OpExposeCreate = NewMutation[ExposeCreateRequest, Exposure](EndpointExposeCreate, LoggedIn)
	// OpExposeList is expose.list: a project's live exposures (members and
	// viewers), or one allocation's.
	OpExposeList = NewQuery[ExposeListRequest, ExposureList](EndpointExposeList, LoggedIn)
	// OpExposeRemove is expose.rm: its creator or a project owner ends an
	// exposure; its URL stops answering.
	OpExposeRemove = NewMutation[ExposeRemoveRequest, Exposure](EndpointExposeRemove, LoggedIn)
	// OpGateAuthorizeHTTP is gate.authorize_http: the gateway asks whether a
	// request for an exposure's host name may pass with the caller's
	// credential (a session or machine token, the login a front cookie is
	// bound to, or none for public exposures), with the same rules and
	// revocation as SSH, and for a ticket to dial the allocation's node
	// (gateway principals only; the bearer travels to controld alone).
	OpGateAuthorizeHTTP = NewQuery[GateAuthorizeHTTPRequest, GateAuthorizeHTTPResponse](EndpointGateAuthorizeHTTP, GatewayOnly)
)

// ExposeCreate serves a port of an allocation over HTTPS.
func (c *Client) ExposeCreate(ctx context.Context, req ExposeCreateRequest, opts ...CallOption) (*Exposure, error) {
	return Do(ctx, c, OpExposeCreate, req, opts...)
}

// ExposeList lists a project's (or an allocation's) live exposures.
func (c *Client) ExposeList(ctx context.Context, req ExposeListRequest) (*ExposureList, error) {
	return Do(ctx, c, OpExposeList, req)
}

// ExposeRemove ends an exposure.
func (c *Client) ExposeRemove(ctx context.Context, req ExposeRemoveRequest, opts ...CallOption) (*Exposure, error) {
	return Do(ctx, c, OpExposeRemove, req, opts...)
}

// GateAuthorizeHTTP asks controld for the verdict on an HTTPS request.
func (c *Client) GateAuthorizeHTTP(ctx context.Context, req GateAuthorizeHTTPRequest) (*GateAuthorizeHTTPResponse, error) {
	return Do(ctx, c, OpGateAuthorizeHTTP, req)
}
