package api

// Endpoints of projects, their members and policy, and the catalog of SKUs.
// Declared once here; see endpoint.go.
var (
	// OpCatalogList is catalog.list: lists the SKUs on offer.
	OpCatalogList = NewQuery[Empty, CatalogResponse](EndpointCatalogList, LoggedIn)
	// OpProjectAddMem is project.add_member: adds a member or changes their role.
	OpProjectAddMem = NewMutation[AddMemberRequest, MembersResponse](EndpointProjectAddMem, LoggedIn)
	// OpProjectCreate is project.create: creates a project owned by the caller.
	OpProjectCreate = NewMutation[ProjectCreateRequest, Project](EndpointProjectCreate, LoggedIn)
	// OpProjectList is project.list: lists the caller's projects.
	OpProjectList = NewQuery[Empty, ProjectListResponse](EndpointProjectList, LoggedIn)
	// OpProjectMembers is project.members: lists a project's members.
	OpProjectMembers = NewQuery[ProjectRef, MembersResponse](EndpointProjectMembers, LoggedIn)
	// OpProjectPolicy is project.set_policy: sets a project's idle policy.
	OpProjectPolicy = NewMutation[ProjectPolicyRequest, ProjectPolicy](EndpointProjectPolicy, LoggedIn)
	// OpProjectUse is project.use: makes project (a name or id) the caller's default project and returns it, with the caller's role.
	OpProjectUse = NewMutation[ProjectUseRequest, Project](EndpointProjectUse, LoggedIn)
)
