package api

// Endpoints of projects, their members and policy, and the catalog of SKUs.
// Each is declared here once: its name (Subject(name) is its subject; audit
// rows and logs name it so) and its descriptor, with its request and
// response types, access level and kind (endpoint.go,
// docs/decisions/0013-endpoint-descriptors.md).
const (
	EndpointCatalogList    = "catalog.list"
	EndpointProjectAddMem  = "project.add_member"
	EndpointProjectCreate  = "project.create"
	EndpointProjectList    = "project.list"
	EndpointProjectMembers = "project.members"
	EndpointProjectPolicy  = "project.set_policy"
	EndpointProjectUse     = "project.use"
)

var (
	// OpCatalogList is catalog.list: lists the SKUs on offer.
	OpCatalogList = NewQuery[Empty, CatalogResponse](EndpointCatalogList, LoggedIn)
	// OpProjectAddMem is project.add_member: adds a member or changes their
	// role.
	OpProjectAddMem = NewMutation[AddMemberRequest, MembersResponse](EndpointProjectAddMem, LoggedIn)
	// OpProjectCreate is project.create: creates a project owned by the
	// caller.
	OpProjectCreate = NewMutation[ProjectCreateRequest, Project](EndpointProjectCreate, LoggedIn)
	// OpProjectList is project.list: lists the caller's projects.
	OpProjectList = NewQuery[Empty, ProjectListResponse](EndpointProjectList, LoggedIn)
	// OpProjectMembers is project.members: lists a project's members.
	OpProjectMembers = NewQuery[ProjectRef, MembersResponse](EndpointProjectMembers, LoggedIn)
	// OpProjectPolicy is project.set_policy: sets a project's idle policy.
	OpProjectPolicy = NewMutation[ProjectPolicyRequest, ProjectPolicy](EndpointProjectPolicy, LoggedIn)
	// OpProjectUse is project.use: makes project (a name or id) the caller's
	// default project and returns it, with the caller's role.
	OpProjectUse = NewMutation[ProjectUseRequest, Project](EndpointProjectUse, LoggedIn)
)
