package identity

import (
	"context"
	"fmt"
	"time"

	"github.com/gpuaas/gpuaas/controld/store"
	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/ids"
)

// ServiceDomain is the email domain of service principals:
// sshgate's is sshgate@service.gpuaas.
const ServiceDomain = "service.gpuaas"

// MaxServiceTokenTTL bounds a service token's life: long enough to deploy
// sshgate with a token in its config, short enough to be renewed yearly.
const MaxServiceTokenTTL = 366 * 24 * time.Hour

// ServiceRoles are the platform roles a service principal may have.
var ServiceRoles = []string{api.RoleGateway}

// EnsureServicePrincipal returns the service user called name with role,
// creating it on first use. Service users have provider "service": no
// password, no OIDC subject, so nobody can log in as one; their tokens come
// from ServiceSession only. An existing user of that email with another
// provider or role is a conflict, never silently changed.
func (s *Service) EnsureServicePrincipal(ctx context.Context, q store.Querier, name, role string) (api.User, error) {
	if !validServiceName(name) {
		return api.User{}, api.Errorf(api.CodeInvalidArgument, "%q is not a valid service name", name).
			WithHint("use 1–32 lower-case letters, digits and dashes, starting with a letter")
	}
	known := false
	for _, r := range ServiceRoles {
		known = known || r == role
	}
	if !known {
		return api.User{}, api.Errorf(api.CodeInvalidArgument, "role %q is not a service role", role).
			WithHint("service principals have the role gateway")
	}
	email := name + "@" + ServiceDomain
	// Two admins issuing the first token at once both end up with the one
	// row that won the insert.
	if _, err := q.Exec(ctx, `INSERT INTO users (id, email, name, role, provider, created_at)
		VALUES ($1,$2,$3,$4,'service',$5) ON CONFLICT ((lower(email))) DO NOTHING`,
		ids.New(ids.User), email, name, role, s.cfg.Now().UTC()); err != nil {
		return api.User{}, fmt.Errorf("create service principal %s: %w", name, err)
	}
	u, err := UserByEmail(ctx, q, email)
	if err != nil {
		return api.User{}, err
	}
	if u.Provider != api.ProviderService || u.Role != role {
		return api.User{}, api.Errorf(api.CodeConflict, "%s exists with provider %s and role %s", email, u.Provider, u.Role)
	}
	return u, nil
}

// ServiceSession opens a session of ttl (at most MaxServiceTokenTTL) for a
// service principal and returns its token.
func (s *Service) ServiceSession(ctx context.Context, q store.Querier, u api.User, ttl time.Duration) (*api.LoginResponse, error) {
	if u.Provider != api.ProviderService {
		return nil, api.Errorf(api.CodeInvalidArgument, "%s is not a service principal", u.Email)
	}
	if ttl <= 0 || ttl > MaxServiceTokenTTL {
		return nil, api.Errorf(api.CodeInvalidArgument, "ttl %s is not in (0, %s]", ttl, MaxServiceTokenTTL)
	}
	return s.openSessionFor(ctx, q, u.ID, ttl)
}

func validServiceName(s string) bool {
	if len(s) == 0 || len(s) > 32 || s[0] < 'a' || s[0] > 'z' {
		return false
	}
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '-') {
			return false
		}
	}
	return true
}

// MaxDelegatedTTL bounds a delegated session (gate.user_token).
const MaxDelegatedTTL = 15 * time.Minute

// DelegatedSession opens a delegated session for a (non-service) user,
// ending at validBefore or MaxDelegatedTTL from now, whichever is first.
func (s *Service) DelegatedSession(ctx context.Context, q store.Querier, u api.User, validBefore time.Time) (*api.LoginResponse, error) {
	if u.Provider == api.ProviderService {
		return nil, api.Errorf(api.CodeForbidden, "%s is a service principal", u.Email)
	}
	now := s.cfg.Now().UTC().Truncate(time.Second)
	exp := now.Add(MaxDelegatedTTL)
	if vb := validBefore.UTC().Truncate(time.Second); vb.Before(exp) {
		exp = vb
	}
	if !exp.After(now) {
		return nil, api.Errorf(api.CodeUnauthenticated, "the certificate has expired")
	}
	return s.openSessionUntil(ctx, q, u.ID, now, exp, true)
}
