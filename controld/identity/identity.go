// Package identity owns users and sessions: local passwords (bcrypt),
// OIDC ID-token exchange, and controld's own session tokens (Ed25519-signed
// JWTs whose session row can be revoked).
package identity

import (
	"context"
	"crypto/ed25519"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

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
}

// IsOperator reports whether p may use operator endpoints.
func (p *Principal) IsOperator() bool { return p.Role == api.RoleOperator || p.Role == api.RoleAdmin }

// IsAdmin reports whether p is an administrator.
func (p *Principal) IsAdmin() bool { return p.Role == api.RoleAdmin }

// IsGateway reports whether p is sshgate's service principal.
func (p *Principal) IsGateway() bool { return p.Role == api.RoleGateway }

// Config configures the identity service.
type Config struct {
	// SigningKey signs session tokens. Required.
	SigningKey ed25519.PrivateKey
	// SessionTTL is how long a session token lives (default 12h).
	SessionTTL time.Duration
	// BcryptCost for new password hashes (default bcrypt.DefaultCost).
	BcryptCost int
	// OIDC, when Issuer is set, enables auth.exchange.
	OIDC OIDCConfig
	Now  func() time.Time
	Log  *slog.Logger
}

// CheckAndSetDefaults validates c and fills defaults.
func (c *Config) CheckAndSetDefaults() error {
	if len(c.SigningKey) != ed25519.PrivateKeySize {
		return errors.New("identity: SigningKey is required")
	}
	if c.SessionTTL == 0 {
		c.SessionTTL = 12 * time.Hour
	}
	if c.BcryptCost == 0 {
		c.BcryptCost = bcrypt.DefaultCost
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
	cfg  Config
	pub  ed25519.PublicKey
	oidc *oidcExchanger
	// dummyHash keeps login time the same for unknown and known emails.
	dummyHash []byte
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
	s := &Service{cfg: cfg, pub: cfg.SigningKey.Public().(ed25519.PublicKey), dummyHash: dummy}
	if cfg.OIDC.Issuer != "" {
		s.oidc = newOIDCExchanger(cfg.OIDC, cfg.Now)
	}
	return s, nil
}

// NewUser describes a user to create.
type NewUser struct {
	Email    string
	Name     string
	Role     string
	Password string // local provider
}

// CreateLocalUser inserts a user with a bcrypt password hash.
func (s *Service) CreateLocalUser(ctx context.Context, q store.Querier, u NewUser) (api.User, error) {
	if err := validateEmail(u.Email); err != nil {
		return api.User{}, err
	}
	if len(u.Password) < 8 {
		return api.User{}, api.Errorf(api.CodeInvalidArgument, "password must be at least 8 characters")
	}
	if u.Role == "" {
		u.Role = api.RoleUser
	}
	hash, err := bcrypt.GenerateFromPassword([]byte(u.Password), s.cfg.BcryptCost)
	if err != nil {
		return api.User{}, fmt.Errorf("hash password: %w", err)
	}
	user := api.User{ID: ids.New(ids.User), Email: u.Email, Name: u.Name, Role: u.Role, Provider: "local", CreatedAt: s.cfg.Now().UTC()}
	_, err = q.Exec(ctx, `INSERT INTO users (id, email, name, role, provider, password_hash, created_at)
		VALUES ($1,$2,$3,$4,'local',$5,$6)`, user.ID, user.Email, user.Name, user.Role, string(hash), user.CreatedAt)
	if store.IsUniqueViolation(err, "users_email_key") {
		return api.User{}, api.Errorf(api.CodeConflict, "a user with email %s already exists", u.Email)
	}
	if err != nil {
		return api.User{}, fmt.Errorf("create user: %w", err)
	}
	return user, nil
}

// SetPassword replaces a local user's password.
func (s *Service) SetPassword(ctx context.Context, q store.Querier, email, password string) error {
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

// Login checks a local user's password and opens a session.
func (s *Service) Login(ctx context.Context, q store.Querier, email, password string) (*api.LoginResponse, error) {
	denied := api.Errorf(api.CodeUnauthenticated, "invalid email or password")
	var hash *string
	var userID string
	err := q.QueryRow(ctx, `SELECT id, password_hash FROM users WHERE lower(email)=lower($1) AND provider='local'`,
		email).Scan(&userID, &hash)
	if errors.Is(err, pgx.ErrNoRows) {
		_ = bcrypt.CompareHashAndPassword(s.dummyHash, []byte(password))
		return nil, denied
	}
	if err != nil {
		return nil, fmt.Errorf("login: %w", err)
	}
	if hash == nil || bcrypt.CompareHashAndPassword([]byte(*hash), []byte(password)) != nil {
		return nil, denied
	}
	return s.openSession(ctx, q, userID)
}

func validateEmail(email string) error {
	at := strings.IndexByte(email, '@')
	if at < 1 || at == len(email)-1 || strings.ContainsAny(email, " \t\r\n") || len(email) > 254 {
		return api.Errorf(api.CodeInvalidArgument, "%q is not an email address", email)
	}
	return nil
}
