package identity

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"golang.org/x/crypto/bcrypt"

	"github.com/gpuaas/gpuaas/controld/store"
	"github.com/gpuaas/gpuaas/internal/api"
)

// DefaultInviteTTL is how long an invite code may be redeemed.
const DefaultInviteTTL = 7 * 24 * time.Hour

func inviteHash(code string) []byte {
	h := sha256.Sum256([]byte(strings.TrimSpace(code)))
	return h[:]
}

// CreateInvite issues a one-time code with which local user userID sets a
// password, replacing any earlier code. Only the code's hash is stored;
// the code itself is returned once. An invite for a user who already has
// a password resets it when redeemed.
func CreateInvite(ctx context.Context, q store.Querier, userID, createdBy string, now time.Time, ttl time.Duration) (api.Invite, error) {
	var email, provider string
	var disabled bool
	err := q.QueryRow(ctx, `SELECT email, provider, disabled_at IS NOT NULL FROM users WHERE id = $1 FOR UPDATE`, userID).
		Scan(&email, &provider, &disabled)
	if errors.Is(err, pgx.ErrNoRows) {
		return api.Invite{}, api.Errorf(api.CodeNotFound, "no user %s", userID)
	}
	if err != nil {
		return api.Invite{}, fmt.Errorf("invite %s: %w", userID, err)
	}
	switch {
	case provider != "local":
		return api.Invite{}, api.Errorf(api.CodeInvalidArgument, "%s logs in through %s, not with a password", email, provider)
	case disabled:
		return api.Invite{}, api.Errorf(api.CodeConflict, "%s is disabled", email).
			WithHint("enable the account first: `gpuaas admin user enable " + email + "`")
	}
	inv := api.Invite{Code: rand.Text(), ExpiresAt: now.UTC().Add(ttl)}
	if _, err := q.Exec(ctx, `INSERT INTO user_invites (user_id, code_hash, created_by, created_at, expires_at)
		VALUES ($1,$2,$3,$4,$5) ON CONFLICT (user_id) DO UPDATE
		SET code_hash = EXCLUDED.code_hash, created_by = EXCLUDED.created_by,
		    created_at = EXCLUDED.created_at, expires_at = EXCLUDED.expires_at`,
		userID, inviteHash(inv.Code), createdBy, now.UTC(), inv.ExpiresAt); err != nil {
		return api.Invite{}, fmt.Errorf("invite %s: %w", userID, err)
	}
	return inv, nil
}

// Redeemed is the outcome of a redeemed invite.
type Redeemed struct {
	Login *api.LoginResponse
	// Revoked are the sessions the user had before (an invite for a user
	// with a password is a password reset).
	Revoked []string
}

// ValidatePassword checks a new password's length.
func ValidatePassword(pw string) error { return validatePassword(pw) }

// RedeemInvite sets the password of the user invited with code and opens
// a session. The code is used up. When email is not empty it must be the
// invited user's.
func (s *Service) RedeemInvite(ctx context.Context, q store.Querier, code, email, password string) (*Redeemed, error) {
	if err := validatePassword(password); err != nil {
		return nil, err
	}
	var userID, userEmail string
	var expires time.Time
	var disabled bool
	err := q.QueryRow(ctx, `SELECT u.id, u.email, i.expires_at, u.disabled_at IS NOT NULL
		FROM user_invites i JOIN users u ON u.id = i.user_id WHERE i.code_hash = $1 FOR UPDATE OF i, u`,
		inviteHash(code)).Scan(&userID, &userEmail, &expires, &disabled)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, api.Errorf(api.CodeUnauthenticated, "this invite code is not valid: it is mistyped, used, or was replaced by a newer one").
			WithHint("ask an administrator for a new invite (`gpuaas admin user invite EMAIL`)")
	}
	if err != nil {
		return nil, fmt.Errorf("redeem invite: %w", err)
	}
	now := s.cfg.Now().UTC()
	switch {
	case !now.Before(expires):
		return nil, api.Errorf(api.CodeUnauthenticated, "this invite expired at %s", expires.Format(time.RFC3339)).
			WithHint("ask an administrator for a new invite (`gpuaas admin user invite EMAIL`)")
	case disabled:
		return nil, errDisabled
	case email != "" && !strings.EqualFold(strings.TrimSpace(email), userEmail):
		return nil, api.Errorf(api.CodeUnauthenticated, "this invite is not for %s", email)
	}
	hash, err := bcrypt.GenerateFromPassword([]byte(password), s.cfg.BcryptCost)
	if err != nil {
		return nil, fmt.Errorf("hash password: %w", err)
	}
	if _, err := q.Exec(ctx, `DELETE FROM user_invites WHERE user_id = $1`, userID); err != nil {
		return nil, fmt.Errorf("redeem invite: %w", err)
	}
	if _, err := q.Exec(ctx, `UPDATE users SET password_hash = $2 WHERE id = $1`, userID, string(hash)); err != nil {
		return nil, fmt.Errorf("set password: %w", err)
	}
	revoked, err := RevokeAll(ctx, q, userID, now)
	if err != nil {
		return nil, err
	}
	login, err := s.openLoginSession(ctx, q, userID)
	if err != nil {
		return nil, err
	}
	return &Redeemed{Login: login, Revoked: revoked}, nil
}
