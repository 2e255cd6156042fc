package identity

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
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
	// MaxIDTokenAge refuses ID tokens issued (iat) longer ago than this,
	// by controld's clock (default DefaultMaxIDTokenAge): a token is
	// exchanged right after the IdP issued it, never kept for later.
	MaxIDTokenAge time.Duration
}

// DefaultMaxIDTokenAge is the default OIDCConfig.MaxIDTokenAge.
const DefaultMaxIDTokenAge = 5 * time.Minute

// idTokenClockSkew is how far in the future an ID token's iat may be
// (the IdP's clock running ahead of controld's).
const idTokenClockSkew = time.Minute

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
	if cfg.MaxIDTokenAge == 0 {
		cfg.MaxIDTokenAge = DefaultMaxIDTokenAge
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
	// AZP is the authorized party: when present, the client the token
	// was issued to.
	AZP string `json:"azp"`
}

// Exchange verifies an ID token from the configured issuer (signature
// against its JWKS, audience and authorized party, expiry, age, and the
// nonce the client sent in its authorization request, if any), records it
// so that it is never exchanged twice, and opens a session for the user
// it names, creating the user on first login. nonce is "" for the device
// flow, whose tokens carry none.
func (s *Service) Exchange(ctx context.Context, q store.Querier, rawIDToken, nonce string) (*api.LoginResponse, error) {
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
	cfg := s.oidc.cfg
	if !slices.Contains(tok.Audience, cfg.ClientID) {
		return nil, api.Errorf(api.CodeUnauthenticated,
			"the identity provider's token is not valid for this server: it was issued to client %s, and this server accepts client %s",
			strings.Join(tok.Audience, ", "), cfg.ClientID).
			WithHint("log in with the client id the server announces (`gpuaas login` asks it); the IdP and controld's --oidc-client-id must agree")
	}
	var c idClaims
	if err := tok.Claims(&c); err != nil {
		return nil, api.Errorf(api.CodeUnauthenticated, "unreadable ID token claims")
	}
	if err := s.checkFresh(tok, c, nonce); err != nil {
		return nil, err
	}
	if err := checkEmail(c, cfg); err != nil {
		return nil, err
	}
	if err := recordExchange(ctx, q, rawIDToken, tok, s.cfg.Now()); err != nil {
		return nil, err
	}
	userID, err := s.oidcUser(ctx, q, tok.Issuer, tok.Subject, c)
	if err != nil {
		return nil, err
	}
	return s.openLoginSession(ctx, q, userID)
}

// checkEmail says which claim is missing when the token does not vouch
// for an email address: the claim itself (the IdP did not release it to
// this client, or the account has none), or email_verified.
func checkEmail(c idClaims, cfg OIDCConfig) error {
	switch {
	case c.Email == "":
		return api.Errorf(api.CodeForbidden,
			"the identity provider's ID token has no email claim, and this server knows people by their email address").
			WithHint(fmt.Sprintf("the IdP must put the email claim in ID tokens for client %s (this server asks for the scopes %s); "+
				"ask its administrator, or give your account an email address there", cfg.ClientID, strings.Join(cfg.Scopes, " ")))
	case c.EmailVerified != nil && !*c.EmailVerified:
		return api.Errorf(api.CodeForbidden,
			"the identity provider has not verified your email address %s (its ID token says email_verified: false)", c.Email).
			WithHint("verify your email with your identity provider, then run `gpuaas login` again")
	}
	return nil
}

// checkFresh refuses tokens that were not issued for this login just now:
// too old, from the future, for another authorized party, or without the
// nonce this client sent.
func (s *Service) checkFresh(tok *oidc.IDToken, c idClaims, nonce string) error {
	cfg, now := s.oidc.cfg, s.cfg.Now()
	relogin := "log in again; if it keeps happening, check this machine's clock against the identity provider's"
	switch {
	case tok.IssuedAt.IsZero():
		return api.Errorf(api.CodeUnauthenticated, "the identity provider's token has no issue time (iat)")
	case now.Sub(tok.IssuedAt) > cfg.MaxIDTokenAge:
		return api.Errorf(api.CodeUnauthenticated, "the identity provider's token was issued %s ago; this server takes tokens at most %s old",
			now.Sub(tok.IssuedAt).Truncate(time.Second), cfg.MaxIDTokenAge).WithHint(relogin)
	case tok.IssuedAt.Sub(now) > idTokenClockSkew:
		return api.Errorf(api.CodeUnauthenticated, "the identity provider's token was issued in the future (at %s)",
			tok.IssuedAt.UTC().Format(time.RFC3339)).WithHint(relogin)
	case c.AZP != "" && c.AZP != cfg.ClientID:
		return api.Errorf(api.CodeUnauthenticated,
			"the identity provider's token was issued to client %s (azp), and this server accepts client %s", c.AZP, cfg.ClientID)
	case subtle.ConstantTimeCompare([]byte(tok.Nonce), []byte(nonce)) != 1:
		if nonce == "" {
			return api.Errorf(api.CodeUnauthenticated, "the identity provider's token carries a nonce, and the exchange sent none")
		}
		return api.Errorf(api.CodeUnauthenticated, "the identity provider's token does not carry the nonce this login sent").
			WithHint("run `gpuaas login --web` again")
	}
	return nil
}

// recordExchange stores the token's hash until it expires; a token
// already stored was exchanged before and is refused. Within the
// exchange's transaction: a concurrent second exchange waits on the first
// and then finds its row.
func recordExchange(ctx context.Context, q store.Querier, raw string, tok *oidc.IDToken, now time.Time) error {
	h := sha256.Sum256([]byte(raw))
	tag, err := q.Exec(ctx, `INSERT INTO oidc_exchanged_tokens (token_hash, issuer, subject, exchanged_at, expires_at)
		VALUES ($1,$2,$3,$4,$5) ON CONFLICT (token_hash) DO NOTHING`, h[:], tok.Issuer, tok.Subject, now.UTC(), tok.Expiry.UTC())
	if err != nil {
		return fmt.Errorf("record id token: %w", err)
	}
	if tag.RowsAffected() == 0 {
		return api.Errorf(api.CodeUnauthenticated, "this ID token was already exchanged for a session; a token is good for one login").
			WithHint("log in again for a new token")
	}
	return nil
}

const userByOIDC = `SELECT id FROM users WHERE oidc_issuer=$1 AND oidc_subject=$2`

func (s *Service) oidcUser(ctx context.Context, q store.Querier, issuer, subject string, c idClaims) (string, error) {
	var id string
	err := q.QueryRow(ctx, userByOIDC, issuer, subject).Scan(&id)
	if err == nil {
		return id, nil
	}
	if !errors.Is(err, pgx.ErrNoRows) {
		return "", fmt.Errorf("find oidc user: %w", err)
	}
	// An email held by another account is never taken over, and a new
	// subject for a known email is not silently a new person: an
	// administrator links the identity (`gpuaas admin user link`).
	if id, err := emailHeld(ctx, q, issuer, subject, c.Email); id != "" || err != nil {
		return id, err
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
		ON CONFLICT (oidc_issuer, oidc_subject) DO NOTHING`,
		id, c.Email, c.Name, s.oidc.cfg.DefaultRole, issuer, subject, s.cfg.Now().UTC())
	if store.IsUniqueViolation(err, "users_email_key") {
		if _, rerr := q.Exec(ctx, `ROLLBACK TO SAVEPOINT oidc_user`); rerr != nil {
			return "", fmt.Errorf("create oidc user: %w", rerr)
		}
		if id, err := emailHeld(ctx, q, issuer, subject, c.Email); id != "" || err != nil {
			return id, err
		}
		return "", api.Errorf(api.CodeConflict, "email %s already belongs to another account", c.Email)
	}
	if err != nil {
		return "", fmt.Errorf("create oidc user: %w", err)
	}
	if tag.RowsAffected() == 0 {
		if err := q.QueryRow(ctx, userByOIDC, issuer, subject).Scan(&id); err != nil {
			return "", fmt.Errorf("find oidc user: %w", err)
		}
	}
	if _, err := q.Exec(ctx, `RELEASE SAVEPOINT oidc_user`); err != nil {
		return "", fmt.Errorf("create oidc user: %w", err)
	}
	return id, nil
}

// emailHeld looks at the account holding email: its id when it is this
// very identity (a concurrent first login of the same subject just made
// it), the conflict when it is another, and nothing when there is none.
func emailHeld(ctx context.Context, q store.Querier, issuer, subject, email string) (string, error) {
	var id, heldIssuer, heldSubject string
	err := q.QueryRow(ctx, `SELECT id, coalesce(oidc_issuer, ''), coalesce(oidc_subject, '') FROM users WHERE lower(email)=lower($1)`,
		email).Scan(&id, &heldIssuer, &heldSubject)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return "", nil
	case err != nil:
		return "", fmt.Errorf("find user by email: %w", err)
	case heldIssuer == issuer && heldSubject == subject:
		return id, nil
	}
	link := fmt.Sprintf("ask an administrator to link the accounts: `gpuaas admin user link %s --issuer %s --subject %s`",
		email, issuer, subject)
	if heldIssuer == issuer {
		return "", api.Errorf(api.CodeConflict,
			"email %s belongs to an account linked to another identity at this provider, not subject %s; a changed subject is not taken for the same person",
			email, subject).WithHint(link)
	}
	return "", api.Errorf(api.CodeConflict, "email %s already belongs to another account", email).WithHint(link)
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
