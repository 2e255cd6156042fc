package identity

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/coreos/go-oidc/v3/oidc"
	"github.com/jackc/pgx/v5"

	"github.com/gpuaas/gpuaas/controld/store"
	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/ids"
)

// OIDCConfig names the identity provider whose ID tokens controld accepts.
type OIDCConfig struct {
	Issuer   string // discovery at Issuer/.well-known/openid-configuration
	ClientID string // the expected audience
	// DefaultRole for users created on first login (default "user").
	DefaultRole string
	// Scopes clients should ask the IdP for (default openid, email,
	// profile); auth.config tells them.
	Scopes []string
}

// DefaultOIDCScopes are the scopes clients ask for: the ID token must
// carry the email address.
var DefaultOIDCScopes = []string{"openid", "email", "profile"}

// oidcExchanger discovers the provider lazily, so controld starts even
// when the IdP is briefly unreachable.
type oidcExchanger struct {
	cfg OIDCConfig
	now func() time.Time

	// mu protects verifier.
	mu       sync.Mutex
	verifier *oidc.IDTokenVerifier
}

func newOIDCExchanger(cfg OIDCConfig, now func() time.Time) *oidcExchanger {
	if cfg.DefaultRole == "" {
		cfg.DefaultRole = api.RoleUser
	}
	if len(cfg.Scopes) == 0 {
		cfg.Scopes = DefaultOIDCScopes
	}
	return &oidcExchanger{cfg: cfg, now: now}
}

func (o *oidcExchanger) getVerifier(ctx context.Context) (*oidc.IDTokenVerifier, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.verifier != nil {
		return o.verifier, nil
	}
	// The provider keeps using this context for JWKS refreshes.
	p, err := oidc.NewProvider(oidc.ClientContext(context.WithoutCancel(ctx), nil), o.cfg.Issuer)
	if err != nil {
		return nil, api.Errorf(api.CodeUnavailable, "identity provider %s is unreachable: %v", o.cfg.Issuer, err)
	}
	// The audience is checked in Exchange, to say which client the token
	// was for.
	o.verifier = p.Verifier(&oidc.Config{SkipClientIDCheck: true, Now: o.now})
	return o.verifier, nil
}

type idClaims struct {
	Email         string `json:"email"`
	EmailVerified *bool  `json:"email_verified"`
	Name          string `json:"name"`
}

// Exchange verifies an ID token from the configured issuer (signature
// against its JWKS, audience, expiry) and opens a session for the user it
// names, creating the user on first login.
func (s *Service) Exchange(ctx context.Context, q store.Querier, rawIDToken string) (*api.LoginResponse, error) {
	if s.oidc == nil {
		return nil, api.Errorf(api.CodeInvalidArgument, "this server has no OIDC provider configured").
			WithHint("log in with a password: `gpuaas login`")
	}
	v, err := s.oidc.getVerifier(ctx)
	if err != nil {
		return nil, err
	}
	tok, err := v.Verify(ctx, rawIDToken)
	if err != nil {
		var expired *oidc.TokenExpiredError
		if errors.As(err, &expired) {
			return nil, api.Errorf(api.CodeUnauthenticated, "the identity provider's token has expired (at %s)",
				expired.Expiry.UTC().Format(time.RFC3339)).
				WithHint("log in again; if it keeps happening, check this machine's clock against the identity provider's")
		}
		return nil, api.Errorf(api.CodeUnauthenticated, "the identity provider's token was refused: %v", err)
	}
	if !slices.Contains(tok.Audience, s.oidc.cfg.ClientID) {
		return nil, api.Errorf(api.CodeUnauthenticated,
			"the identity provider's token is not valid for this server: it was issued to client %s, and this server accepts client %s",
			strings.Join(tok.Audience, ", "), s.oidc.cfg.ClientID).
			WithHint("log in with the client id the server announces (`gpuaas login` asks it); the IdP and controld's --oidc-client-id must agree")
	}
	var c idClaims
	if err := tok.Claims(&c); err != nil {
		return nil, api.Errorf(api.CodeUnauthenticated, "unreadable ID token claims")
	}
	if c.Email == "" || (c.EmailVerified != nil && !*c.EmailVerified) {
		return nil, api.Errorf(api.CodeForbidden, "the identity provider did not vouch for an email address").
			WithHint("verify your email with your identity provider")
	}
	userID, err := s.oidcUser(ctx, q, tok.Issuer, tok.Subject, c)
	if err != nil {
		return nil, err
	}
	return s.openSession(ctx, q, userID)
}

func (s *Service) oidcUser(ctx context.Context, q store.Querier, issuer, subject string, c idClaims) (string, error) {
	var id string
	err := q.QueryRow(ctx, `SELECT id FROM users WHERE provider='oidc' AND oidc_issuer=$1 AND oidc_subject=$2`,
		issuer, subject).Scan(&id)
	if err == nil {
		return id, nil
	}
	if !errors.Is(err, pgx.ErrNoRows) {
		return "", fmt.Errorf("find oidc user: %w", err)
	}
	id = ids.New(ids.User)
	// Two first logins of one subject may race (two terminals): the loser
	// waits on the winner's row and then uses it. The ON CONFLICT covers
	// the subject index; when the email index trips first, the savepoint
	// lets us look again once the winner has committed. q is the
	// mutation's transaction.
	if _, err := q.Exec(ctx, `SAVEPOINT oidc_user`); err != nil {
		return "", fmt.Errorf("create oidc user: %w", err)
	}
	tag, err := q.Exec(ctx, `INSERT INTO users (id, email, name, role, provider, oidc_issuer, oidc_subject, created_at)
		VALUES ($1,$2,$3,$4,'oidc',$5,$6,$7)
		ON CONFLICT (oidc_issuer, oidc_subject) WHERE provider = 'oidc' DO NOTHING`,
		id, c.Email, c.Name, s.oidc.cfg.DefaultRole, issuer, subject, s.cfg.Now().UTC())
	if store.IsUniqueViolation(err, "users_email_key") {
		if _, rerr := q.Exec(ctx, `ROLLBACK TO SAVEPOINT oidc_user`); rerr != nil {
			return "", fmt.Errorf("create oidc user: %w", rerr)
		}
		if rerr := q.QueryRow(ctx, `SELECT id FROM users WHERE provider='oidc' AND oidc_issuer=$1 AND oidc_subject=$2`,
			issuer, subject).Scan(&id); rerr == nil {
			return id, nil // a concurrent first login of the same subject won
		}
		return "", api.Errorf(api.CodeConflict, "email %s already belongs to another account", c.Email).
			WithHint("ask an administrator to link the accounts")
	}
	if err != nil {
		return "", fmt.Errorf("create oidc user: %w", err)
	}
	if tag.RowsAffected() == 0 {
		if err := q.QueryRow(ctx, `SELECT id FROM users WHERE provider='oidc' AND oidc_issuer=$1 AND oidc_subject=$2`,
			issuer, subject).Scan(&id); err != nil {
			return "", fmt.Errorf("find oidc user: %w", err)
		}
	}
	if _, err := q.Exec(ctx, `RELEASE SAVEPOINT oidc_user`); err != nil {
		return "", fmt.Errorf("create oidc user: %w", err)
	}
	return id, nil
}

// LoginMethods says how clients may log in (auth.config).
func (s *Service) LoginMethods() api.AuthConfigResponse {
	// Local password login is always on: the seeded admin and operators
	// use it even where people log in through the IdP.
	resp := api.AuthConfigResponse{Password: true}
	if s.oidc != nil {
		c := s.oidc.cfg
		resp.OIDC = &api.OIDCProvider{Issuer: c.Issuer, ClientID: c.ClientID, Scopes: slices.Clone(c.Scopes)}
	}
	return resp
}
