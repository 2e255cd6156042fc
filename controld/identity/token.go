package identity

import (
	"cmp"
	"context"
	"crypto/ed25519"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/jackc/pgx/v5"

	"github.com/gpuaas/gpuaas/controld/store"
	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/ids"
)

// tokenIssuer is the iss claim of controld's session tokens.
const tokenIssuer = "gpuaas-controld"

var loginHint = "run `gpuaas login`"

func (s *Service) openSession(ctx context.Context, q store.Querier, userID string) (*api.LoginResponse, error) {
	return s.openSessionFor(ctx, q, userID, s.cfg.SessionTTL)
}

func (s *Service) openSessionFor(ctx context.Context, q store.Querier, userID string, ttl time.Duration) (*api.LoginResponse, error) {
	now := s.cfg.Now().UTC().Truncate(time.Second)
	return s.openSessionUntil(ctx, q, userID, now, now.Add(ttl), false)
}

// openSessionUntil opens a session from now until exp; a delegated one is
// marked so (see Principal.Delegated).
func (s *Service) openSessionUntil(ctx context.Context, q store.Querier, userID string, now, exp time.Time, delegated bool) (*api.LoginResponse, error) {
	// FOR SHARE orders this against a concurrent disable: either the
	// disable waits and then revokes this session too, or this sees the
	// user disabled.
	var disabled bool
	err := q.QueryRow(ctx, `SELECT disabled_at IS NOT NULL FROM users WHERE id = $1 FOR SHARE`, userID).Scan(&disabled)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, api.Errorf(api.CodeNotFound, "no such user")
	}
	if err != nil {
		return nil, fmt.Errorf("open session: %w", err)
	}
	if disabled {
		return nil, errDisabled
	}
	sid := ids.New(ids.Session)
	if _, err := q.Exec(ctx, `INSERT INTO sessions (id, user_id, created_at, expires_at, delegated) VALUES ($1,$2,$3,$4,$5)`,
		sid, userID, now, exp, delegated); err != nil {
		return nil, fmt.Errorf("open session: %w", err)
	}
	tok := jwt.NewWithClaims(jwt.SigningMethodEdDSA, jwt.RegisteredClaims{
		Issuer:    tokenIssuer,
		Subject:   userID,
		ID:        sid,
		IssuedAt:  jwt.NewNumericDate(now),
		NotBefore: jwt.NewNumericDate(now),
		ExpiresAt: jwt.NewNumericDate(exp),
	})
	signed, err := tok.SignedString(s.cfg.SigningKey)
	if err != nil {
		return nil, fmt.Errorf("sign session token: %w", err)
	}
	user, err := UserByID(ctx, q, userID)
	if err != nil {
		return nil, err
	}
	return &api.LoginResponse{Token: signed, SessionID: sid, ExpiresAt: exp, User: user}, nil
}

// Authenticate verifies a bearer token: signature (Ed25519 only), issuer,
// validity window against the injected clock, and that its session exists,
// belongs to the subject and is not revoked.
func (s *Service) Authenticate(ctx context.Context, q store.Querier, bearer string) (*Principal, error) {
	raw, ok := strings.CutPrefix(bearer, "Bearer ")
	if !ok || raw == "" {
		return nil, api.Errorf(api.CodeUnauthenticated, "not logged in").WithHint(loginHint)
	}
	if p, ok := s.cache.get(raw); ok {
		return p, nil
	}
	epoch := s.cache.begin()
	if id, ok := api.MachineTokenID(raw); ok {
		return s.authenticateMachineToken(ctx, q, raw, id, epoch)
	}
	var claims jwt.RegisteredClaims
	_, err := jwt.ParseWithClaims(raw, &claims, func(t *jwt.Token) (any, error) {
		return s.pub, nil
	}, jwt.WithValidMethods([]string{jwt.SigningMethodEdDSA.Alg()}), jwt.WithIssuer(tokenIssuer),
		jwt.WithTimeFunc(s.cfg.Now), jwt.WithExpirationRequired())
	switch {
	case errors.Is(err, jwt.ErrTokenExpired):
		return nil, api.Errorf(api.CodeUnauthenticated, "your session has expired").WithHint(loginHint)
	case err != nil:
		return nil, api.Errorf(api.CodeUnauthenticated, "invalid session token").WithHint(loginHint)
	}
	p := &Principal{SessionID: claims.ID, ExpiresAt: claims.ExpiresAt.Time}
	var owner string
	var revoked, disabled *time.Time
	var expires time.Time
	err = q.QueryRow(ctx, `SELECT s.user_id, s.revoked_at, s.expires_at, s.delegated, u.email, u.role, u.disabled_at
		FROM sessions s JOIN users u ON u.id = s.user_id WHERE s.id = $1`, claims.ID).
		Scan(&owner, &revoked, &expires, &p.Delegated, &p.Email, &p.Role, &disabled)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, api.Errorf(api.CodeUnauthenticated, "unknown session").WithHint(loginHint)
	}
	if err != nil {
		return nil, fmt.Errorf("authenticate: %w", err)
	}
	if owner != claims.Subject {
		return nil, api.Errorf(api.CodeUnauthenticated, "invalid session token").WithHint(loginHint)
	}
	if disabled != nil {
		// Disabling revokes the sessions too; this also covers any
		// session opened while the disable was committing.
		return nil, api.Errorf(api.CodeUnauthenticated, "this account is disabled").
			WithHint("ask an administrator (`gpuaas admin user enable`)")
	}
	if revoked != nil {
		return nil, api.Errorf(api.CodeUnauthenticated, "this session was logged out").WithHint(loginHint)
	}
	if !s.cfg.Now().Before(expires) {
		return nil, api.Errorf(api.CodeUnauthenticated, "your session has expired").WithHint(loginHint)
	}
	p.UserID = owner
	if claims.ExpiresAt.Before(expires) {
		expires = claims.ExpiresAt.Time
	}
	s.cache.put(epoch, raw, p, expires)
	return p, nil
}

// TokenSubject returns the user a session token names when controld signed
// it, whether or not it is still valid (ended, revoked, expired): whose
// inbox an answer to it belongs in (controld's reply guard), never who may
// act.
func (s *Service) TokenSubject(raw string) (string, bool) {
	var claims jwt.RegisteredClaims
	_, err := jwt.ParseWithClaims(raw, &claims, func(t *jwt.Token) (any, error) {
		return s.pub, nil
	}, jwt.WithValidMethods([]string{jwt.SigningMethodEdDSA.Alg()}), jwt.WithIssuer(tokenIssuer),
		jwt.WithoutClaimsValidation())
	if err != nil || claims.Subject == "" {
		return "", false
	}
	return claims.Subject, true
}

// Revoke ends a session; later requests with its token are refused.
func Revoke(ctx context.Context, q store.Querier, sessionID string, at time.Time) error {
	// The notification goes out at commit to every replica's session
	// cache (RunRevocations).
	if _, err := q.Exec(ctx, `WITH r AS (UPDATE sessions SET revoked_at=$2 WHERE id=$1 AND revoked_at IS NULL RETURNING id)
		SELECT pg_notify('`+RevokedChannel+`', id) FROM r`, sessionID, at); err != nil {
		return fmt.Errorf("revoke session: %w", err)
	}
	return nil
}

// RevokeAll ends every live session of a user (delegated ones included)
// and returns their ids, oldest first, for the session.revoked event.
func RevokeAll(ctx context.Context, q store.Querier, userID string, at time.Time) ([]string, error) {
	// Each revoked session is notified at commit to every replica's
	// session cache (RunRevocations).
	rows, err := q.Query(ctx, `WITH r AS (UPDATE sessions SET revoked_at = $2
		WHERE user_id = $1 AND revoked_at IS NULL AND expires_at > $2 RETURNING id, created_at)
		SELECT id, created_at FROM r, LATERAL (SELECT pg_notify('`+RevokedChannel+`', r.id)) n`, userID, at)
	if err != nil {
		return nil, fmt.Errorf("revoke sessions of %s: %w", userID, err)
	}
	type revoked struct {
		id string
		at time.Time
	}
	got, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (revoked, error) {
		var v revoked
		return v, r.Scan(&v.id, &v.at)
	})
	if err != nil {
		return nil, fmt.Errorf("revoke sessions of %s: %w", userID, err)
	}
	slices.SortFunc(got, func(a, b revoked) int { return cmp.Or(a.at.Compare(b.at), cmp.Compare(a.id, b.id)) })
	ids := make([]string, len(got))
	for i, v := range got {
		ids[i] = v.id
	}
	return ids, nil
}

// PublicKey is the key session tokens verify against.
func (s *Service) PublicKey() ed25519.PublicKey { return s.pub }
