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
	EndpointExposeLink        = "expose.link"
	EndpointGateRedeemLink    = "gate.redeem_link"
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
	// OpExposeLink is expose.link: a one-time code, valid for a minute,
	// that opens an exposure the caller may open in a browser: the front
	// sets a cookie bound to the caller's login and goes to the path asked
	// for on the exposure's own host (a person's session only).
	OpExposeLink = NewQuery[ExposeLinkRequest, ExposeLinkResponse](EndpointExposeLink, LoggedIn)
	// OpGateRedeemLink is gate.redeem_link: the front redeems a one-time
	// link's code, once, on the exposure it was minted for (gateway
	// principals only).
	OpGateRedeemLink = NewQuery[GateRedeemLinkRequest, GateRedeemLinkResponse](EndpointGateRedeemLink, GatewayOnly)
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

// ExposeLink mints a one-time link into an exposure.
func (c *Client) ExposeLink(ctx context.Context, req ExposeLinkRequest) (*ExposeLinkResponse, error) {
	return Do(ctx, c, OpExposeLink, req)
}

// GateRedeemLink redeems a one-time link's code.
func (c *Client) GateRedeemLink(ctx context.Context, req GateRedeemLinkRequest) (*GateRedeemLinkResponse, error) {
	return Do(ctx, c, OpGateRedeemLink, req)
}
