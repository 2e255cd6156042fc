package controld

import (
	"context"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/gpuaas/gpuaas/controld/audit"
	"github.com/gpuaas/gpuaas/controld/identity"
	"github.com/gpuaas/gpuaas/controld/identity/identityapi"
	"github.com/gpuaas/gpuaas/controld/outbox"
	"github.com/gpuaas/gpuaas/controld/store"
	"github.com/gpuaas/gpuaas/internal/api"
)

// BootstrapConfig describes the first admin of an installation.
type BootstrapConfig struct {
	// DatabaseURL is controld's database, reached directly (the API needs
	// an admin to add one). Required.
	DatabaseURL string
	// Email of the first admin. Required.
	Email string
	Name  string
	// InviteTTL is how long the invite lasts (default 7 days).
	InviteTTL time.Duration
	// Reissue replaces the invite of a first admin who has not redeemed
	// it (the code was lost) instead of refusing because an admin exists.
	Reissue bool
	// DatabaseRole is the role to act as (default store.AppRole, as
	// controld); migrations run as the login role.
	DatabaseRole string
	Now          func() time.Time
}

// CheckAndSetDefaults validates c and fills defaults.
func (c *BootstrapConfig) CheckAndSetDefaults() error {
	if c.DatabaseURL == "" {
		return errors.New("bootstrap: DatabaseURL is required")
	}
	if c.Email == "" {
		return errors.New("bootstrap: Email is required")
	}
	if c.InviteTTL == 0 {
		c.InviteTTL = identity.DefaultInviteTTL
	}
	if c.InviteTTL < 0 {
		return errors.New("bootstrap: InviteTTL must be positive")
	}
	if c.DatabaseRole == "" {
		c.DatabaseRole = store.AppRole
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	return nil
}

// BootstrapResult is the admin created and their one-time invite.
type BootstrapResult struct {
	Admin  api.User
	Invite api.Invite
}

// Bootstrap creates the first admin of an installation outside `gpuaas
// dev`, talking to Postgres directly: it applies the migrations as
// controld does, refuses when any admin exists (but see Reissue), and
// creates the admin as invited, with an invite code the admin redeems with
// `gpuaas login --invite CODE`. The change is audited (actor "bootstrap")
// with its outbox event, in one transaction.
func Bootstrap(ctx context.Context, cfg BootstrapConfig) (BootstrapResult, error) {
	var res BootstrapResult
	if err := cfg.CheckAndSetDefaults(); err != nil {
		return res, err
	}
	if err := store.MigrateURL(ctx, cfg.DatabaseURL); err != nil {
		return res, err
	}
	pool, err := store.OpenAs(ctx, cfg.DatabaseURL, 2, cfg.DatabaseRole)
	if err != nil {
		return res, err
	}
	defer pool.Close()
	now := cfg.Now().UTC()
	err = pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		u, inv, err := identity.BootstrapAdmin(ctx, tx, identity.NewUser{Email: cfg.Email, Name: cfg.Name}, now, cfg.InviteTTL, cfg.Reissue)
		if err != nil {
			return err
		}
		au, err := identity.AdminUserByRef(ctx, tx, u.ID, false)
		if err != nil {
			return err
		}
		action := "admin.bootstrap"
		if cfg.Reissue {
			action = "admin.bootstrap_reissue"
		}
		if err := audit.Write(ctx, tx, audit.Meta{At: now, ActorID: "bootstrap"}, audit.Entry{Action: action,
			TargetType: "user", TargetID: u.ID, Detail: map[string]any{"email": u.Email, "invite_expires_at": inv.ExpiresAt}}); err != nil {
			return err
		}
		if _, err := outbox.Enqueue(ctx, tx, now, identityapi.UserEvent(au)); err != nil {
			return err
		}
		res = BootstrapResult{Admin: u, Invite: inv}
		return nil
	})
	return res, err
}
