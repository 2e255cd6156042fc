package identity

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/gpuaas/gpuaas/controld/store"
	"github.com/gpuaas/gpuaas/internal/api"
)

// adminUserColumns reads an api.AdminUser (scanAdminUser) from users u
// left-joined to their pending invite i.
const adminUserColumns = `SELECT u.id, u.email, u.name, u.role, u.provider, u.password_hash IS NOT NULL,
	coalesce(u.oidc_issuer, ''), coalesce(u.oidc_subject, ''), u.created_at, u.last_login_at, u.disabled_at, i.expires_at
	FROM users u LEFT JOIN user_invites i ON i.user_id = u.id`

func scanAdminUser(row pgx.Row) (api.AdminUser, error) {
	var u api.AdminUser
	var hasPassword bool
	err := row.Scan(&u.ID, &u.Email, &u.Name, &u.Role, &u.Provider, &hasPassword, &u.OIDCIssuer, &u.OIDCSubject,
		&u.CreatedAt, &u.LastLoginAt, &u.DisabledAt, &u.InviteExpiresAt)
	if err != nil {
		return u, err
	}
	switch {
	case u.DisabledAt != nil:
		u.State = api.UserDisabled
	case u.Provider == "local" && !hasPassword:
		u.State = api.UserInvited
	default:
		u.State = api.UserActive
	}
	return u, nil
}

// AdminUserByRef finds a user by email (anything with an @) or id, for
// update when forUpdate is set (the caller's transaction then holds the
// row until it ends).
func AdminUserByRef(ctx context.Context, q store.Querier, ref string, forUpdate bool) (api.AdminUser, error) {
	ref = strings.TrimSpace(ref)
	if ref == "" {
		return api.AdminUser{}, api.Errorf(api.CodeInvalidArgument, "name a user by email or id")
	}
	where := ` WHERE u.id = $1`
	if strings.Contains(ref, "@") {
		where = ` WHERE lower(u.email) = lower($1)`
	}
	lock := ""
	if forUpdate {
		lock = ` FOR UPDATE OF u`
	}
	u, err := scanAdminUser(q.QueryRow(ctx, adminUserColumns+where+lock, ref))
	if errors.Is(err, pgx.ErrNoRows) {
		return u, api.Errorf(api.CodeNotFound, "no user %s", ref).WithHint("see `gpuaas admin user list`")
	}
	if err != nil {
		return u, fmt.Errorf("read user %s: %w", ref, err)
	}
	return u, nil
}

// ListUsers lists every user, oldest first.
func ListUsers(ctx context.Context, q store.Querier) ([]api.AdminUser, error) {
	rows, err := q.Query(ctx, adminUserColumns+` ORDER BY u.created_at, u.id`)
	if err != nil {
		return nil, fmt.Errorf("list users: %w", err)
	}
	us, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (api.AdminUser, error) { return scanAdminUser(r) })
	if err != nil {
		return nil, fmt.Errorf("list users: %w", err)
	}
	if us == nil {
		us = []api.AdminUser{}
	}
	return us, nil
}

// IsDisabled reports whether a user is disabled.
func IsDisabled(ctx context.Context, q store.Querier, userID string) (bool, error) {
	var disabled bool
	err := q.QueryRow(ctx, `SELECT disabled_at IS NOT NULL FROM users WHERE id = $1`, userID).Scan(&disabled)
	if errors.Is(err, pgx.ErrNoRows) {
		return false, api.Errorf(api.CodeNotFound, "no such user")
	}
	if err != nil {
		return false, fmt.Errorf("read user %s: %w", userID, err)
	}
	return disabled, nil
}

// CreateInvitedUser adds a local user without a password; an invite
// (CreateInvite) lets them set one.
func CreateInvitedUser(ctx context.Context, q store.Querier, u NewUser, now time.Time) (api.User, error) {
	if err := validateNewUser(&u); err != nil {
		return api.User{}, err
	}
	return insertLocalUser(ctx, q, u, nil, now)
}

// lockAdmins serializes changes that could leave no active admin: two
// admins disabling each other at once must not both succeed.
func lockAdmins(ctx context.Context, q store.Querier) error {
	if _, err := q.Exec(ctx, `SELECT pg_advisory_xact_lock(hashtextextended('gpuaas.identity.admins', 0))`); err != nil {
		return fmt.Errorf("lock admins: %w", err)
	}
	return nil
}

// AnyAdmin reports whether any admin exists, disabled or not.
func AnyAdmin(ctx context.Context, q store.Querier) (bool, error) {
	var exists bool
	if err := q.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM users WHERE role = 'admin')`).Scan(&exists); err != nil {
		return false, fmt.Errorf("look for admins: %w", err)
	}
	return exists, nil
}

// Disable disables user ref on behalf of actorID and revokes all the
// user's sessions, returning the user and the revoked session ids. It
// refuses to disable the actor themselves or the last active admin.
func Disable(ctx context.Context, q store.Querier, ref, actorID string, now time.Time) (api.AdminUser, []string, error) {
	if err := lockAdmins(ctx, q); err != nil {
		return api.AdminUser{}, nil, err
	}
	u, err := AdminUserByRef(ctx, q, ref, true)
	if err != nil {
		return u, nil, err
	}
	switch {
	case u.ID == actorID:
		return u, nil, api.Errorf(api.CodeInvalidArgument, "you cannot disable yourself").
			WithHint("another admin can disable your account")
	case u.State == api.UserDisabled:
		return u, nil, api.Errorf(api.CodeConflict, "%s is already disabled", u.Email)
	case u.Role == api.RoleAdmin:
		var others int
		if err := q.QueryRow(ctx, `SELECT count(*) FROM users WHERE role = 'admin' AND disabled_at IS NULL AND id <> $1`,
			u.ID).Scan(&others); err != nil {
			return u, nil, fmt.Errorf("count admins: %w", err)
		}
		if others == 0 {
			return u, nil, api.Errorf(api.CodeConflict, "%s is the last active admin", u.Email).
				WithHint("make another admin first (`gpuaas admin user add EMAIL --role admin`)")
		}
	}
	now = now.UTC()
	if _, err := q.Exec(ctx, `UPDATE users SET disabled_at = $2 WHERE id = $1`, u.ID, now); err != nil {
		return u, nil, fmt.Errorf("disable %s: %w", u.ID, err)
	}
	revoked, err := RevokeAll(ctx, q, u.ID, now)
	if err != nil {
		return u, nil, err
	}
	if err := notifyTokensOf(ctx, q, u.ID); err != nil {
		return u, nil, err
	}
	// A disabled user's invite must not let them back in.
	if _, err := q.Exec(ctx, `DELETE FROM user_invites WHERE user_id = $1`, u.ID); err != nil {
		return u, nil, fmt.Errorf("drop invite of %s: %w", u.ID, err)
	}
	u, err = AdminUserByRef(ctx, q, u.ID, false)
	return u, revoked, err
}

// Enable lets a disabled user log in again. Their old sessions stay
// revoked.
func Enable(ctx context.Context, q store.Querier, ref string) (api.AdminUser, error) {
	u, err := AdminUserByRef(ctx, q, ref, true)
	if err != nil {
		return u, err
	}
	if u.State != api.UserDisabled {
		return u, api.Errorf(api.CodeConflict, "%s is not disabled", u.Email)
	}
	if _, err := q.Exec(ctx, `UPDATE users SET disabled_at = NULL WHERE id = $1`, u.ID); err != nil {
		return u, fmt.Errorf("enable %s: %w", u.ID, err)
	}
	return AdminUserByRef(ctx, q, u.ID, false)
}

// LinkOIDC links the identity provider's (issuer, subject) to user ref, who
// may then log in through it (`gpuaas admin user link`): for an account
// whose email the IdP's user already holds here, or a person whose IdP
// subject changed. The pair must not belong to another user.
func LinkOIDC(ctx context.Context, q store.Querier, ref, issuer, subject string) (api.AdminUser, error) {
	issuer, subject = strings.TrimSpace(issuer), strings.TrimSpace(subject)
	if issuer == "" || subject == "" || len(issuer) > 1000 || len(subject) > 255 {
		return api.AdminUser{}, api.Errorf(api.CodeInvalidArgument, "issuer and subject are required (at most 1000 and 255 bytes)")
	}
	u, err := AdminUserByRef(ctx, q, ref, true)
	if err != nil {
		return u, err
	}
	switch {
	case u.Provider == api.ProviderService:
		return u, api.Errorf(api.CodeInvalidArgument, "%s is a service principal; it cannot log in through an IdP", u.Email)
	case u.OIDCIssuer == issuer && u.OIDCSubject == subject:
		return u, api.Errorf(api.CodeConflict, "%s is already linked to that identity", u.Email)
	}
	var holder string
	err = q.QueryRow(ctx, `SELECT email FROM users WHERE oidc_issuer = $1 AND oidc_subject = $2`, issuer, subject).Scan(&holder)
	if err == nil {
		return u, api.Errorf(api.CodeConflict, "that identity is linked to %s", holder).
			WithHint("disable or relink that account first")
	}
	if !errors.Is(err, pgx.ErrNoRows) {
		return u, fmt.Errorf("look up oidc identity: %w", err)
	}
	_, err = q.Exec(ctx, `UPDATE users SET oidc_issuer = $2, oidc_subject = $3 WHERE id = $1`, u.ID, issuer, subject)
	if store.IsUniqueViolation(err, "users_oidc_key") {
		return u, api.Errorf(api.CodeConflict, "that identity was just linked to another user")
	}
	if err != nil {
		return u, fmt.Errorf("link %s: %w", u.ID, err)
	}
	return AdminUserByRef(ctx, q, u.ID, false)
}

// BootstrapAdmin creates the first admin, invited (no password yet), with
// an invite code, unless any admin exists already. With reissue, when the
// admins are only that email's, never redeemed, it issues them a new code
// instead (the first one was lost).
func BootstrapAdmin(ctx context.Context, q store.Querier, u NewUser, now time.Time, ttl time.Duration, reissue bool) (api.User, api.Invite, error) {
	u.Role = api.RoleAdmin
	if err := lockAdmins(ctx, q); err != nil {
		return api.User{}, api.Invite{}, err
	}
	exists, err := AnyAdmin(ctx, q)
	if err != nil {
		return api.User{}, api.Invite{}, err
	}
	if exists && reissue {
		return reissueBootstrap(ctx, q, u.Email, now, ttl)
	}
	if exists {
		return api.User{}, api.Invite{}, api.Errorf(api.CodeConflict, "an admin exists already; bootstrap only makes the first").
			WithHint("an admin adds more with `gpuaas admin user add EMAIL --role admin`; --reissue replaces a first admin's unused invite")
	}
	user, err := CreateInvitedUser(ctx, q, u, now)
	if err != nil {
		return api.User{}, api.Invite{}, err
	}
	inv, err := CreateInvite(ctx, q, user.ID, "bootstrap", now, ttl)
	return user, inv, err
}

func reissueBootstrap(ctx context.Context, q store.Querier, email string, now time.Time, ttl time.Duration) (api.User, api.Invite, error) {
	var others int
	if err := q.QueryRow(ctx, `SELECT count(*) FROM users WHERE role = 'admin'
		AND (lower(email) <> lower($1) OR password_hash IS NOT NULL OR disabled_at IS NOT NULL)`, email).Scan(&others); err != nil {
		return api.User{}, api.Invite{}, fmt.Errorf("look for admins: %w", err)
	}
	if others > 0 {
		return api.User{}, api.Invite{}, api.Errorf(api.CodeConflict,
			"--reissue only replaces the invite of a first admin who never set a password, and %s is not one (or other admins exist)", email).
			WithHint("an active admin issues invites with `gpuaas admin user invite EMAIL`")
	}
	user, err := UserByEmail(ctx, q, email)
	if err != nil {
		return api.User{}, api.Invite{}, err
	}
	inv, err := CreateInvite(ctx, q, user.ID, "bootstrap", now, ttl)
	return user, inv, err
}
