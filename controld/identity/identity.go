// Package identity owns users and sessions, and what hangs off them
// (user_invites, login_attempts, oidc_exchanged_tokens): local passwords
// (bcrypt), OIDC ID-token exchange, and controld's own session tokens
// (Ed25519-signed JWTs whose session row can be revoked).
package identity

import (
	"context"
	"crypto/ed25519"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"
	"golang.org/x/crypto/bcrypt"

	"github.com/gpuaas/gpuaas/controld/store"
	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/ids"
)

// Principal is the authenticated caller of a request.
type Principal struct {
	UserID    string
	Email     string
	Role      string
	SessionID string
	ExpiresAt time.Time
	// Delegated is set on sessions sshgate opened for a certificate-holding
	// user (gate.user_token): they act as the user but may not mint
	// credentials nor call ops.* or gate.* endpoints.
	Delegated bool
	// TokenID and TokenName are set when the caller is a token for
	// machines (docs/tokens.md): UserID is then the token's own principal.
	TokenID, TokenName string
}

// IsOperator reports whether p may use operator endpoints.
func (p *Principal) IsOperator() bool { return p.Role == api.RoleOperator || p.Role == api.RoleAdmin }

// IsAdmin reports whether p is an administrator.
func (p *Principal) IsAdmin() bool { return p.Role == api.RoleAdmin }

// IsGateway reports whether p is sshgate's service principal.
func (p *Principal) IsGateway() bool { return p.Role == api.RoleGateway }

// Settings tune identity. Zero values take the defaults.
type Settings struct {
	// SessionTTL is how long a session token lives (default 12h).
	SessionTTL time.Duration
	// BcryptCost for new password hashes (default bcrypt.DefaultCost).
	BcryptCost int
	// OIDC, when Issuer is set, enables auth.exchange (its MaxIDTokenAge
	// defaults to 5m).
	OIDC OIDCConfig
	// LoginLimits bound failed logins per account and per source
	// (defaults: DefaultAccountLimit, DefaultSourceLimit).
	LoginLimits LoginLimits
	// InviteTTL is how long an invite code may be redeemed (default
	// DefaultInviteTTL).
	InviteTTL time.Duration
	// SessionCacheTTL is how long a replica reuses a session check
	// without reading the session again (default DefaultSessionCacheTTL;
	// negative: no cache). Revocations reach the cache at once through
	// RunRevocations; the TTL only bounds a lost notification.
	SessionCacheTTL time.Duration
}

// CheckAndSetDefaults validates s and fills defaults.
func (s *Settings) CheckAndSetDefaults() error {
	if s.SessionTTL == 0 {
		s.SessionTTL = 12 * time.Hour
	}
	if s.BcryptCost == 0 {
		s.BcryptCost = bcrypt.DefaultCost
	}
	if s.OIDC.MaxIDTokenAge < 0 {
		return errors.New("identity: OIDC MaxIDTokenAge must not be negative")
	}
	if err := s.LoginLimits.CheckAndSetDefaults(); err != nil {
		return err
	}
	if s.InviteTTL == 0 {
		s.InviteTTL = DefaultInviteTTL
	}
	if s.InviteTTL < 0 {
		return errors.New("identity: InviteTTL must be positive")
	}
	if s.SessionCacheTTL == 0 {
		s.SessionCacheTTL = DefaultSessionCacheTTL
	}
	return nil
}

// Config configures the identity service.
type Config struct {
	// SigningKey signs session tokens. Required.
	SigningKey ed25519.PrivateKey
	Settings
	Now func() time.Time
	Log *slog.Logger
}

// CheckAndSetDefaults validates c and fills defaults.
func (c *Config) CheckAndSetDefaults() error {
	if len(c.SigningKey) != ed25519.PrivateKeySize {
		return errors.New("identity: SigningKey is required")
	}
	if err := c.Settings.CheckAndSetDefaults(); err != nil {
		return err
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.Log == nil {
		c.Log = slog.New(slog.DiscardHandler)
	}
	return nil
}

// Service authenticates callers.
type Service struct {
	cfg     Config
	pub     ed25519.PublicKey
	oidc    *oidcExchanger
	limiter *Limiter
	// dummyHash keeps login time the same for unknown and known emails.
	dummyHash []byte
	cache     *sessionCache
}

// New returns a Service.
func New(cfg Config) (*Service, error) {
	if err := cfg.CheckAndSetDefaults(); err != nil {
		return nil, err
	}
	dummy, err := bcrypt.GenerateFromPassword([]byte("not a password"), cfg.BcryptCost)
	if err != nil {
		return nil, fmt.Errorf("dummy hash: %w", err)
	}
	s := &Service{cfg: cfg, pub: cfg.SigningKey.Public().(ed25519.PublicKey), dummyHash: dummy,
		limiter: NewLimiter(cfg.LoginLimits, cfg.Now), cache: newSessionCache(cfg.SessionCacheTTL, cfg.Now)}
	if cfg.OIDC.Issuer != "" {
		s.oidc = newOIDCExchanger(cfg.OIDC, cfg.Now)
	}
	return s, nil
}

// Limiter counts failed logins.
func (s *Service) Limiter() *Limiter { return s.limiter }

// InviteTTL is how long new invite codes last.
func (s *Service) InviteTTL() time.Duration { return s.cfg.InviteTTL }

// NewUser describes a user to create.
type NewUser struct {
	Email    string
	Name     string
	Role     string
	Password string // local provider
}

// CreateLocalUser inserts a user with a bcrypt password hash.
func (s *Service) CreateLocalUser(ctx context.Context, q store.Querier, u NewUser) (api.User, error) {
	if err := validateNewUser(&u); err != nil {
		return api.User{}, err
	}
	if err := validatePassword(u.Password); err != nil {
		return api.User{}, err
	}
	hash, err := bcrypt.GenerateFromPassword([]byte(u.Password), s.cfg.BcryptCost)
	if err != nil {
		return api.User{}, fmt.Errorf("hash password: %w", err)
	}
	return insertLocalUser(ctx, q, u, &hash, s.cfg.Now())
}

// insertLocalUser inserts a local user; hash is nil for an invited user.
func insertLocalUser(ctx context.Context, q store.Querier, u NewUser, hash *[]byte, now time.Time) (api.User, error) {
	user := api.User{ID: ids.New(ids.User), Email: u.Email, Name: u.Name, Role: u.Role, Provider: "local", CreatedAt: now.UTC()}
	var h *string
	if hash != nil {
		s := string(*hash)
		h = &s
	}
	_, err := q.Exec(ctx, `INSERT INTO users (id, email, name, role, provider, password_hash, created_at)
		VALUES ($1,$2,$3,$4,'local',$5,$6)`, user.ID, user.Email, user.Name, user.Role, h, user.CreatedAt)
	if store.IsUniqueViolation(err, "users_email_key") {
		return api.User{}, api.Errorf(api.CodeConflict, "a user with email %s already exists", u.Email)
	}
	if err != nil {
		return api.User{}, fmt.Errorf("create user: %w", err)
	}
	return user, nil
}

// MinPasswordLength and MaxPasswordBytes bound local passwords (bcrypt
// reads at most 72 bytes).
const (
	MinPasswordLength = 8
	MaxPasswordBytes  = 72
)

func validatePassword(pw string) error {
	switch {
	case utf8.RuneCountInString(pw) < MinPasswordLength:
		return api.Errorf(api.CodeInvalidArgument, "password must be at least %d characters", MinPasswordLength)
	case len(pw) > MaxPasswordBytes:
		return api.Errorf(api.CodeInvalidArgument, "password must be at most %d bytes", MaxPasswordBytes)
	}
	return nil
}

// validateNewUser checks and normalizes what an administrator asked for.
func validateNewUser(u *NewUser) error {
	u.Email = strings.TrimSpace(u.Email)
	u.Name = strings.TrimSpace(u.Name)
	if err := validateEmail(u.Email); err != nil {
		return err
	}
	if len(u.Name) > 200 {
		return api.Errorf(api.CodeInvalidArgument, "name must be at most 200 bytes")
	}
	if err := api.CheckText("name", u.Name); err != nil {
		return err
	}
	if u.Role == "" {
		u.Role = api.RoleUser
	}
	switch u.Role {
	case api.RoleUser, api.RoleOperator, api.RoleAdmin:
	default:
		return api.Errorf(api.CodeInvalidArgument, "role %q is not one of user, operator, admin", u.Role)
	}
	return nil
}

// SetPassword replaces a local user's password.
func (s *Service) SetPassword(ctx context.Context, q store.Querier, email, password string) error {
	if err := validatePassword(password); err != nil {
		return err
	}
	hash, err := bcrypt.GenerateFromPassword([]byte(password), s.cfg.BcryptCost)
	if err != nil {
		return fmt.Errorf("hash password: %w", err)
	}
	tag, err := q.Exec(ctx, `UPDATE users SET password_hash=$2 WHERE lower(email)=lower($1) AND provider='local'`, email, string(hash))
	if err != nil {
		return fmt.Errorf("set password: %w", err)
	}
	if tag.RowsAffected() == 0 {
		return api.Errorf(api.CodeNotFound, "no local user %s", email)
	}
	return nil
}

// UserByEmail looks a user up.
func UserByEmail(ctx context.Context, q store.Querier, email string) (api.User, error) {
	return scanUser(q.QueryRow(ctx, userColumns+` WHERE lower(email)=lower($1)`, email))
}

// UserByID looks a user up.
func UserByID(ctx context.Context, q store.Querier, id string) (api.User, error) {
	return scanUser(q.QueryRow(ctx, userColumns+` WHERE id=$1`, id))
}

const userColumns = `SELECT id, email, name, role, provider, created_at FROM users`

func scanUser(row pgx.Row) (api.User, error) {
	var u api.User
	err := row.Scan(&u.ID, &u.Email, &u.Name, &u.Role, &u.Provider, &u.CreatedAt)
	if errors.Is(err, pgx.ErrNoRows) {
		return u, api.Errorf(api.CodeNotFound, "no such user")
	}
	if err != nil {
		return u, fmt.Errorf("read user: %w", err)
	}
	return u, nil
}

// Login checks a local user's password and opens a session. Unknown
// emails, users without a password (invited, OIDC, service) and wrong
// passwords take the same path, one bcrypt comparison, and get the same
// answer; a disabled user learns so only with the right password.
func (s *Service) Login(ctx context.Context, q store.Querier, email, password string) (*api.LoginResponse, error) {
	denied := api.Errorf(api.CodeUnauthenticated, "invalid email or password")
	var stored *string
	var userID, provider string
	err := q.QueryRow(ctx, `SELECT id, provider, password_hash FROM users WHERE lower(email)=lower($1)`,
		email).Scan(&userID, &provider, &stored)
	if err != nil && !errors.Is(err, pgx.ErrNoRows) {
		return nil, fmt.Errorf("login: %w", err)
	}
	hash, usable := s.dummyHash, false
	if err == nil && provider == "local" && stored != nil {
		hash, usable = []byte(*stored), true
	}
	if bcrypt.CompareHashAndPassword(hash, []byte(password)) != nil || !usable {
		return nil, denied
	}
	// A disabled user, with the right password, is told so (when opening
	// the session, which also orders this login against a disable).
	return s.openLoginSession(ctx, q, userID)
}

// errDisabled refuses a disabled user.
var errDisabled = api.Errorf(api.CodeForbidden, "this account is disabled").
	WithHint("ask an administrator (`gpuaas admin user enable`)")

// openLoginSession opens an interactive session and records the login.
func (s *Service) openLoginSession(ctx context.Context, q store.Querier, userID string) (*api.LoginResponse, error) {
	if _, err := q.Exec(ctx, `UPDATE users SET last_login_at = $2 WHERE id = $1`, userID, s.cfg.Now().UTC()); err != nil {
		return nil, fmt.Errorf("record login: %w", err)
	}
	return s.openSession(ctx, q, userID)
}

func validateEmail(email string) error {
	if err := api.CheckText("email", email); err != nil {
		return err
	}
	at := strings.IndexByte(email, '@')
	if at < 1 || at == len(email)-1 || strings.ContainsAny(email, " \t\r\n") || len(email) > 254 {
		return api.Errorf(api.CodeInvalidArgument, "%q is not an email address", email)
	}
	return nil
}
