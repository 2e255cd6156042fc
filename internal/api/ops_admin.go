package api

// Endpoints of user administration (admins).
// Declared once here; see endpoint.go.
var (
	// OpAdminUserAdd is admin.user_add: creates an invited local user.
	OpAdminUserAdd = NewSecretMutation[UserAddRequest, UserInviteResponse](EndpointAdminUserAdd, AdminOnly)
	// OpAdminUserDisable is admin.user_disable: disables a user and revokes all their sessions.
	OpAdminUserDisable = NewMutation[UserRef, UserDisableResponse](EndpointAdminUserDisable, AdminOnly)
	// OpAdminUserEnable is admin.user_enable: enables a disabled user.
	OpAdminUserEnable = NewMutation[UserRef, AdminUser](EndpointAdminUserEnable, AdminOnly)
	// OpAdminUserInvite is admin.user_invite: issues a new invite code for a local user, replacing any earlier one.
	OpAdminUserInvite = NewSecretMutation[UserRef, UserInviteResponse](EndpointAdminUserInvite, AdminOnly)
	// OpAdminUserLink is admin.user_link: links an OIDC identity to an existing user.
	OpAdminUserLink = NewMutation[UserLinkRequest, AdminUser](EndpointAdminUserLink, AdminOnly)
	// OpAdminUserList is admin.user_list: lists users.
	OpAdminUserList = NewQuery[Empty, UserListResponse](EndpointAdminUserList, AdminOnly)
)
