package api

import (
	"context"
	"time"
)

// EventUser is published when an administrator adds, invites, disables,
// enables or links a user; the payload is the AdminUser after the change.
const EventUser = "user"

// User states, as `gpuaas admin user list` shows them.
const (
	UserActive   = "active"
	UserInvited  = "invited" // a local user who has not set a password yet
	UserDisabled = "disabled"
)

// AdminUser is a user as administrators see it.
type AdminUser struct {
	ID       string `json:"id"`
	Email    string `json:"email"`
	Name     string `json:"name,omitempty"`
	Role     string `json:"role"`
	Provider string `json:"provider"`
	State    string `json:"state"`
	// OIDCIssuer and OIDCSubject name the linked IdP identity, if any.
	OIDCIssuer      string     `json:"oidc_issuer,omitempty"`
	OIDCSubject     string     `json:"oidc_subject,omitempty"`
	CreatedAt       time.Time  `json:"created_at"`
	LastLoginAt     *time.Time `json:"last_login_at,omitempty"`
	DisabledAt      *time.Time `json:"disabled_at,omitempty"`
	InviteExpiresAt *time.Time `json:"invite_expires_at,omitempty"`
}

// UserAddRequest creates a local user who is invited to set a password.
type UserAddRequest struct {
	Email string `json:"email"`
	Name  string `json:"name,omitempty"`
	// Role is user (default), operator or admin.
	Role string `json:"role,omitempty"`
}

// UserRef names a user by email or id.
type UserRef struct {
	User string `json:"user"`
}

// Invite is a one-time code that lets a user set their password:
// `gpuaas login --invite CODE`. Only its hash is stored; it is shown once.
type Invite struct {
	Code      string    `json:"code"`
	ExpiresAt time.Time `json:"expires_at"`
}

// UserInviteResponse is a user with a fresh invite.
type UserInviteResponse struct {
	User   AdminUser `json:"user"`
	Invite Invite    `json:"invite"`
}

// UserListResponse lists every user.
type UserListResponse struct {
	Users []AdminUser `json:"users"`
}

// UserDisableResponse is a disabled user and the sessions that ended.
type UserDisableResponse struct {
	User            AdminUser `json:"user"`
	RevokedSessions []string  `json:"revoked_sessions"`
}

// UserLinkRequest links an OIDC identity (issuer and subject) to an
// existing user, who may then log in through that identity provider.
type UserLinkRequest struct {
	User    string `json:"user"`
	Issuer  string `json:"issuer"`
	Subject string `json:"subject"`
}

// AdminUserAdd creates an invited local user.
func (c *Client) AdminUserAdd(ctx context.Context, req UserAddRequest, opts ...CallOption) (*UserInviteResponse, error) {
	return Do(ctx, c, OpAdminUserAdd, req, opts...)
}

// AdminUserList lists users.
func (c *Client) AdminUserList(ctx context.Context) (*UserListResponse, error) {
	return Do(ctx, c, OpAdminUserList, Empty{})
}

// AdminUserDisable disables a user and revokes all their sessions.
func (c *Client) AdminUserDisable(ctx context.Context, user string, opts ...CallOption) (*UserDisableResponse, error) {
	return Do(ctx, c, OpAdminUserDisable, UserRef{User: user}, opts...)
}

// AdminUserEnable enables a disabled user.
func (c *Client) AdminUserEnable(ctx context.Context, user string, opts ...CallOption) (*AdminUser, error) {
	return Do(ctx, c, OpAdminUserEnable, UserRef{User: user}, opts...)
}

// AdminUserInvite issues a new invite code for a local user, replacing any
// earlier one.
func (c *Client) AdminUserInvite(ctx context.Context, user string, opts ...CallOption) (*UserInviteResponse, error) {
	return Do(ctx, c, OpAdminUserInvite, UserRef{User: user}, opts...)
}

// AdminUserLink links an OIDC identity to an existing user.
func (c *Client) AdminUserLink(ctx context.Context, req UserLinkRequest, opts ...CallOption) (*AdminUser, error) {
	return Do(ctx, c, OpAdminUserLink, req, opts...)
}
