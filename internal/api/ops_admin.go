package api

// Endpoints of user administration (admins). Each is declared here once: its
// name (Subject(name) is its subject; audit rows and logs name it so) and
// its descriptor, with its request and response types, access level and
// kind (endpoint.go, docs/decisions/0013-endpoint-descriptors.md).
const (
	EndpointAdminUserAdd     = "admin.user_add"
	EndpointAdminUserDisable = "admin.user_disable"
	EndpointAdminUserEnable  = "admin.user_enable"
	EndpointAdminUserInvite  = "admin.user_invite"
	EndpointAdminUserLink    = "admin.user_link"
	EndpointAdminUserList    = "admin.user_list"
)

var (
	// OpAdminUserAdd is admin.user_add: creates an invited local user.
	OpAdminUserAdd = NewSecretMutation[UserAddRequest, UserInviteResponse](EndpointAdminUserAdd, AdminOnly)
	// OpAdminUserDisable is admin.user_disable: disables a user and revokes
	// all their sessions.
	OpAdminUserDisable = NewMutation[UserRef, UserDisableResponse](EndpointAdminUserDisable, AdminOnly)
	// OpAdminUserEnable is admin.user_enable: enables a disabled user.
	OpAdminUserEnable = NewMutation[UserRef, AdminUser](EndpointAdminUserEnable, AdminOnly)
	// OpAdminUserInvite is admin.user_invite: issues a new invite code for a
	// local user, replacing any earlier one.
	OpAdminUserInvite = NewSecretMutation[UserRef, UserInviteResponse](EndpointAdminUserInvite, AdminOnly)
	// OpAdminUserLink is admin.user_link: links an OIDC identity to an
	// existing user.
	OpAdminUserLink = NewMutation[UserLinkRequest, AdminUser](EndpointAdminUserLink, AdminOnly)
	// OpAdminUserList is admin.user_list: lists users.
	OpAdminUserList = NewQuery[Empty, UserListResponse](EndpointAdminUserList, AdminOnly)
)
