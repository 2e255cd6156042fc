package api

import "context"

// Endpoint names of exposures: an allocation's ports served over HTTPS
// through the gateway (docs/expose.md).
const (
	EndpointExposeCreate = "expose.create"
	EndpointExposeList   = "expose.list"
	EndpointExposeRemove = "expose.rm"
	EndpointExposeLink   = "expose.link"
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
	// OpExposeLink is expose.link: a one-time code, valid for a minute,
	// that opens an exposure the caller may open in a browser: the front
	// sets a cookie bound to the caller's login and goes to the path asked
	// for on the exposure's own host (a person's session only).
	OpExposeLink = NewQuery[ExposeLinkRequest, ExposeLinkResponse](EndpointExposeLink, LoggedIn)
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

// ExposeLink mints a one-time link into an exposure.
func (c *Client) ExposeLink(ctx context.Context, req ExposeLinkRequest) (*ExposeLinkResponse, error) {
	return Do(ctx, c, OpExposeLink, req)
}
