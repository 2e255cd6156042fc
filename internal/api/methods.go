package api

import "context"

// Login authenticates with the local provider.
func (c *Client) Login(ctx context.Context, req LoginRequest) (*LoginResponse, error) {
	var out LoginResponse
	return &out, c.Mutate(ctx, EndpointAuthLogin, req, &out)
}

// Exchange trades an OIDC ID token for a session token.
func (c *Client) Exchange(ctx context.Context, req ExchangeRequest) (*LoginResponse, error) {
	var out LoginResponse
	return &out, c.Mutate(ctx, EndpointAuthExchange, req, &out)
}

// Logout revokes the current session token.
func (c *Client) Logout(ctx context.Context) (*LogoutResponse, error) {
	var out LogoutResponse
	return &out, c.Mutate(ctx, EndpointAuthLogout, nil, &out)
}

// Whoami describes the caller.
func (c *Client) Whoami(ctx context.Context) (*WhoamiResponse, error) {
	var out WhoamiResponse
	return &out, c.Call(ctx, EndpointAuthWhoami, nil, &out)
}

// ProjectCreate creates a project owned by the caller.
func (c *Client) ProjectCreate(ctx context.Context, req ProjectCreateRequest, opts ...CallOption) (*Project, error) {
	var out Project
	return &out, c.Mutate(ctx, EndpointProjectCreate, req, &out, opts...)
}

// ProjectList lists the caller's projects.
func (c *Client) ProjectList(ctx context.Context) (*ProjectListResponse, error) {
	var out ProjectListResponse
	return &out, c.Call(ctx, EndpointProjectList, nil, &out)
}

// ProjectMembers lists a project's members.
func (c *Client) ProjectMembers(ctx context.Context, project string) (*MembersResponse, error) {
	var out MembersResponse
	return &out, c.Call(ctx, EndpointProjectMembers, ProjectRef{Project: project}, &out)
}

// ProjectAddMember adds a member or changes their role.
func (c *Client) ProjectAddMember(ctx context.Context, req AddMemberRequest, opts ...CallOption) (*MembersResponse, error) {
	var out MembersResponse
	return &out, c.Mutate(ctx, EndpointProjectAddMem, req, &out, opts...)
}

// CatalogList lists the SKUs on offer.
func (c *Client) CatalogList(ctx context.Context) (*CatalogResponse, error) {
	var out CatalogResponse
	return &out, c.Call(ctx, EndpointCatalogList, nil, &out)
}

// NodeList lists nodes (operators).
func (c *Client) NodeList(ctx context.Context) (*NodeListResponse, error) {
	var out NodeListResponse
	return &out, c.Call(ctx, EndpointNodeList, nil, &out)
}

// NodeGet returns a node with its slots (operators).
func (c *Client) NodeGet(ctx context.Context, node string) (*NodeDetail, error) {
	var out NodeDetail
	return &out, c.Call(ctx, EndpointNodeGet, NodeRef{Node: node}, &out)
}

// SlotsApprove approves pending slots (operators).
func (c *Client) SlotsApprove(ctx context.Context, req SlotsApproveRequest, opts ...CallOption) (*NodeDetail, error) {
	var out NodeDetail
	return &out, c.Mutate(ctx, EndpointSlotsApprove, req, &out, opts...)
}

// NodeDrain stops new placements on a node (operators).
func (c *Client) NodeDrain(ctx context.Context, node string, opts ...CallOption) (*Node, error) {
	var out Node
	return &out, c.Mutate(ctx, EndpointNodeDrain, NodeRef{Node: node}, &out, opts...)
}

// AllocCreate requests an allocation.
func (c *Client) AllocCreate(ctx context.Context, req AllocCreateRequest, opts ...CallOption) (*Allocation, error) {
	var out Allocation
	return &out, c.Mutate(ctx, EndpointAllocCreate, req, &out, opts...)
}

// AllocQuote prices req and reports whether it would be placed now,
// changing nothing (`gpuaas alloc create --dry-run`).
func (c *Client) AllocQuote(ctx context.Context, req AllocCreateRequest) (*AllocQuote, error) {
	var out AllocQuote
	return &out, c.Call(ctx, EndpointAllocQuote, req, &out)
}

// AllocGet returns one allocation.
func (c *Client) AllocGet(ctx context.Context, id string) (*Allocation, error) {
	var out Allocation
	return &out, c.Call(ctx, EndpointAllocGet, AllocRef{ID: id}, &out)
}

// AllocList lists allocations.
func (c *Client) AllocList(ctx context.Context, req AllocListRequest) (*AllocListResponse, error) {
	var out AllocListResponse
	return &out, c.Call(ctx, EndpointAllocList, req, &out)
}

// AllocRelease releases an allocation.
func (c *Client) AllocRelease(ctx context.Context, req AllocReleaseRequest, opts ...CallOption) (*Allocation, error) {
	var out Allocation
	return &out, c.Mutate(ctx, EndpointAllocRelease, req, &out, opts...)
}

// NodeEnroll creates a one-time enrollment token for a new node
// (operators).
func (c *Client) NodeEnroll(ctx context.Context, req EnrollTokenRequest, opts ...CallOption) (*EnrollTokenResponse, error) {
	var out EnrollTokenResponse
	return &out, c.Mutate(ctx, EndpointNodeEnroll, req, &out, opts...)
}
