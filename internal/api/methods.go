package api

import "context"

// Login authenticates with the local provider.
func (c *Client) Login(ctx context.Context, req LoginRequest) (*LoginResponse, error) {
	return Do(ctx, c, OpAuthLogin, req)
}

// Exchange trades an OIDC ID token for a session token.
func (c *Client) Exchange(ctx context.Context, req ExchangeRequest) (*LoginResponse, error) {
	return Do(ctx, c, OpAuthExchange, req)
}

// Logout revokes the current session token.
func (c *Client) Logout(ctx context.Context) (*LogoutResponse, error) {
	return Do(ctx, c, OpAuthLogout, Empty{})
}

// Whoami describes the caller.
func (c *Client) Whoami(ctx context.Context) (*WhoamiResponse, error) {
	return Do(ctx, c, OpAuthWhoami, Empty{})
}

// ProjectCreate creates a project owned by the caller.
func (c *Client) ProjectCreate(ctx context.Context, req ProjectCreateRequest, opts ...CallOption) (*Project, error) {
	return Do(ctx, c, OpProjectCreate, req, opts...)
}

// ProjectList lists the caller's projects.
func (c *Client) ProjectList(ctx context.Context) (*ProjectListResponse, error) {
	return Do(ctx, c, OpProjectList, Empty{})
}

// ProjectMembers lists a project's members.
func (c *Client) ProjectMembers(ctx context.Context, project string) (*MembersResponse, error) {
	return Do(ctx, c, OpProjectMembers, ProjectRef{Project: project})
}

// ProjectAddMember adds a member or changes their role.
func (c *Client) ProjectAddMember(ctx context.Context, req AddMemberRequest, opts ...CallOption) (*MembersResponse, error) {
	return Do(ctx, c, OpProjectAddMem, req, opts...)
}

// CatalogList lists the SKUs on offer.
func (c *Client) CatalogList(ctx context.Context) (*CatalogResponse, error) {
	return Do(ctx, c, OpCatalogList, Empty{})
}

// NodeList lists nodes (operators).
func (c *Client) NodeList(ctx context.Context) (*NodeListResponse, error) {
	return Do(ctx, c, OpNodeList, Empty{})
}

// NodeGet returns a node with its slots (operators).
func (c *Client) NodeGet(ctx context.Context, node string) (*NodeDetail, error) {
	return Do(ctx, c, OpNodeGet, NodeRef{Node: node})
}

// SlotsApprove approves pending slots (operators).
func (c *Client) SlotsApprove(ctx context.Context, req SlotsApproveRequest, opts ...CallOption) (*NodeDetail, error) {
	return Do(ctx, c, OpSlotsApprove, req, opts...)
}

// NodeDrain stops new placements on a node (operators).
func (c *Client) NodeDrain(ctx context.Context, node string, opts ...CallOption) (*Node, error) {
	return Do(ctx, c, OpNodeDrain, NodeRef{Node: node}, opts...)
}

// AllocCreate requests an allocation.
func (c *Client) AllocCreate(ctx context.Context, req AllocCreateRequest, opts ...CallOption) (*Allocation, error) {
	return Do(ctx, c, OpAllocCreate, req, opts...)
}

// AllocQuote prices req and reports whether it would be placed now,
// changing nothing (`gpuaas alloc create --dry-run`).
func (c *Client) AllocQuote(ctx context.Context, req AllocCreateRequest) (*AllocQuote, error) {
	return Do(ctx, c, OpAllocQuote, req)
}

// AllocGet returns one allocation.
func (c *Client) AllocGet(ctx context.Context, id string) (*Allocation, error) {
	return Do(ctx, c, OpAllocGet, AllocRef{ID: id})
}

// AllocList lists allocations.
func (c *Client) AllocList(ctx context.Context, req AllocListRequest) (*AllocListResponse, error) {
	return Do(ctx, c, OpAllocList, req)
}

// AllocRelease releases an allocation.
func (c *Client) AllocRelease(ctx context.Context, req AllocReleaseRequest, opts ...CallOption) (*Allocation, error) {
	return Do(ctx, c, OpAllocRelease, req, opts...)
}

// NodeEnroll creates a one-time enrollment token for a new node
// (operators).
func (c *Client) NodeEnroll(ctx context.Context, req EnrollTokenRequest, opts ...CallOption) (*EnrollTokenResponse, error) {
	return Do(ctx, c, OpNodeEnroll, req, opts...)
}
