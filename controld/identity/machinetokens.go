package identity

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base32"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/gpuaas/gpuaas/controld/store"
	"github.com/gpuaas/gpuaas/internal/api"
)

// Tokens for machines (docs/tokens.md, docs/decisions/0014-tokens-and-
// audit-chain.md). identity owns api_tokens: each token is a principal of
// its own (a users row of provider "token" whose id is the token's), so
// every check that reads a caller's user id and project role applies to it
// as it is; controld refuses it the endpoints beyond a project's work.

// tokenAlphabet is internal/ids' alphabet: token ids and secrets read as ids do.
var tokenAlphabet = base32.NewEncoding("0123456789abcdefghjkmnpqrstvwxyz").WithPadding(base32.NoPadding)

// NewMachineToken describes a token to create.
type NewMachineToken struct {
	Name      string
	ProjectID string
	Role      string // api.ProjectMember or api.ProjectViewer
	TTL       time.Duration
	CreatedBy string
}

// CreateMachineToken inserts a token and its principal and returns the
// token and its secret, which is stored only as its SHA-256. The caller
// makes the principal a member of the project (project.SetMember) in the
// same transaction. Its project role and TTL are checked here too, so
// that nothing else can make a broader token.
func (s *Service) CreateMachineToken(ctx context.Context, q store.Querier, t NewMachineToken) (api.Token, string, error) {
	if err := api.CheckTokenName(t.Name); err != nil {
		return api.Token{}, "", err
	}
	if t.Role != api.ProjectMember && t.Role != api.ProjectViewer {
		return api.Token{}, "", api.Errorf(api.CodeInvalidArgument, "role %q: a token is a member or a viewer", t.Role)
	}
	if t.TTL < api.MinTokenTTL || t.TTL > api.MaxTokenTTL {
		return api.Token{}, "", api.Errorf(api.CodeInvalidArgument, "ttl %s is not within [%s, %s]", t.TTL, api.MinTokenTTL, api.MaxTokenTTL)
	}
	var raw [40]byte // 8 for the id, 32 for the secret
	if _, err := rand.Read(raw[:]); err != nil {
		return api.Token{}, "", fmt.Errorf("token secret: %w", err)
	}
	idPart := tokenAlphabet.EncodeToString(raw[:8])[:12]
	secret := api.TokenSecretPrefix + idPart + "_" + tokenAlphabet.EncodeToString(raw[8:])
	id := api.TokenIDPrefix + idPart
	now := s.cfg.Now().UTC().Truncate(time.Second)
	hash := sha256.Sum256([]byte(secret))
	if _, err := q.Exec(ctx, `INSERT INTO users (id, email, name, role, provider, created_at)
		VALUES ($1, $2, $3, 'user', 'token', $4)`, id, id+"@"+api.TokenDomain, t.Name, now); err != nil {
		return api.Token{}, "", fmt.Errorf("create token principal: %w", err)
	}
	_, err := q.Exec(ctx, `INSERT INTO api_tokens (id, name, project_id, role, secret_hash, created_by, created_at, expires_at)
		VALUES ($1,$2,$3,$4,$5,$6,$7,$8)`, id, t.Name, t.ProjectID, t.Role, hash[:], t.CreatedBy, now, now.Add(t.TTL))
	if store.IsUniqueViolation(err, "api_tokens_name_key") {
		return api.Token{}, "", api.Errorf(api.CodeConflict, "the project already has a token named %q", t.Name).
			WithHint("pick another name, or revoke that one first (`gpuaas token revoke " + t.Name + "`)")
	}
	if err != nil {
		return api.Token{}, "", fmt.Errorf("create token: %w", err)
	}
	tok, err := s.MachineToken(ctx, q, id)
	return tok, secret, err
}

// tokenColumns reads an api.Token (scanToken).
const tokenColumns = `SELECT t.id, t.name, t.project_id, p.name, t.role, t.created_by, c.email, t.created_at,
	t.expires_at, t.revoked_at FROM api_tokens t JOIN projects p ON p.id = t.project_id JOIN users c ON c.id = t.created_by`

func (s *Service) scanToken(r pgx.CollectableRow) (api.Token, error) {
	var t api.Token
	err := r.Scan(&t.ID, &t.Name, &t.ProjectID, &t.Project, &t.Role, &t.CreatedBy, &t.CreatedByEmail, &t.CreatedAt,
		&t.ExpiresAt, &t.RevokedAt)
	switch {
	case err != nil:
	case t.RevokedAt != nil:
		t.State = api.TokenRevoked
	case !s.cfg.Now().Before(t.ExpiresAt):
		t.State = api.TokenExpired
	default:
		t.State = api.TokenActive
	}
	return t, err
}

// MachineToken returns the token with id.
func (s *Service) MachineToken(ctx context.Context, q store.Querier, id string) (api.Token, error) {
	rows, err := q.Query(ctx, tokenColumns+` WHERE t.id = $1`, id)
	if err != nil {
		return api.Token{}, fmt.Errorf("read token %s: %w", id, err)
	}
	t, err := pgx.CollectExactlyOneRow(rows, s.scanToken)
	if errors.Is(err, pgx.ErrNoRows) {
		return t, api.Errorf(api.CodeNotFound, "token %q not found", id).WithHint("see `gpuaas token list`")
	}
	if err != nil {
		return t, fmt.Errorf("read token %s: %w", id, err)
	}
	return t, nil
}

// MachineTokenByName returns the project's live token called name (not
// revoked; the name is free again once it is).
func (s *Service) MachineTokenByName(ctx context.Context, q store.Querier, projectID, name string) (api.Token, error) {
	var id string
	err := q.QueryRow(ctx, `SELECT id FROM api_tokens WHERE project_id = $1 AND name = $2 AND revoked_at IS NULL`,
		projectID, name).Scan(&id)
	if errors.Is(err, pgx.ErrNoRows) {
		return api.Token{}, api.Errorf(api.CodeNotFound, "no token named %q in this project", name).
			WithHint("see `gpuaas token list --all`")
	}
	if err != nil {
		return api.Token{}, fmt.Errorf("find token %s: %w", name, err)
	}
	return s.MachineToken(ctx, q, id)
}

// MachineTokens lists a project's tokens, oldest first: the live ones,
// or with all the revoked and expired ones too.
func (s *Service) MachineTokens(ctx context.Context, q store.Querier, projectID string, all bool) ([]api.Token, error) {
	rows, err := q.Query(ctx, tokenColumns+` WHERE t.project_id = $1 AND ($2 OR (t.revoked_at IS NULL AND t.expires_at > $3))
		ORDER BY t.created_at, t.id`, projectID, all, s.cfg.Now())
	if err != nil {
		return nil, fmt.Errorf("list tokens: %w", err)
	}
	out, err := pgx.CollectRows(rows, s.scanToken)
	if err != nil {
		return nil, fmt.Errorf("list tokens: %w", err)
	}
	return out, nil
}

// RevokeMachineToken ends a token at at. Its requests are refused from the
// commit on, on every replica: the revocation is notified like a session's
// (RevokedChannel, RunRevocations), and the caller marks it on this one
// (Revoking) before committing.
func (s *Service) RevokeMachineToken(ctx context.Context, q store.Querier, id, by string, at time.Time) (api.Token, error) {
	tag, err := q.Exec(ctx, `WITH r AS (UPDATE api_tokens SET revoked_at = $2, revoked_by = $3
		WHERE id = $1 AND revoked_at IS NULL RETURNING id)
		SELECT pg_notify('`+RevokedChannel+`', id) FROM r`, id, at, by)
	if err != nil {
		return api.Token{}, fmt.Errorf("revoke token %s: %w", id, err)
	}
	if tag.RowsAffected() == 0 {
		return api.Token{}, api.Errorf(api.CodeConflict, "token %s is already revoked", id)
	}
	return s.MachineToken(ctx, q, id)
}

// authenticateMachineToken checks a token's secret against its stored
// hash, and that the token is neither revoked nor expired and neither it
// nor its creator is disabled. A successful check is cached like a
// session's, and dropped from the cache when the token is revoked.
func (s *Service) authenticateMachineToken(ctx context.Context, q store.Querier, raw, id string, epoch uint64) (*Principal, error) {
	refused := func(why string) error {
		return api.Errorf(api.CodeUnauthenticated, "token %s %s", id, why).
			WithHint("ask a project owner for a new token (`gpuaas token create`)")
	}
	var hash []byte
	var expires time.Time
	var revoked, disabled, creatorDisabled *time.Time
	p := &Principal{UserID: id, SessionID: id, TokenID: id}
	err := q.QueryRow(ctx, `SELECT t.secret_hash, t.expires_at, t.revoked_at, t.name, u.email, u.role, u.disabled_at, c.disabled_at
		FROM api_tokens t JOIN users u ON u.id = t.id JOIN users c ON c.id = t.created_by WHERE t.id = $1`, id).
		Scan(&hash, &expires, &revoked, &p.TokenName, &p.Email, &p.Role, &disabled, &creatorDisabled)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, api.Errorf(api.CodeUnauthenticated, "unknown token").WithHint("check GPUAAS_TOKEN")
	}
	if err != nil {
		return nil, fmt.Errorf("authenticate token: %w", err)
	}
	sum := sha256.Sum256([]byte(raw))
	switch {
	case subtle.ConstantTimeCompare(sum[:], hash) != 1:
		return nil, api.Errorf(api.CodeUnauthenticated, "unknown token").WithHint("check GPUAAS_TOKEN")
	case revoked != nil:
		return nil, refused("was revoked")
	case !s.cfg.Now().Before(expires):
		return nil, refused("has expired")
	case disabled != nil || creatorDisabled != nil:
		return nil, refused("belongs to a disabled account")
	}
	p.ExpiresAt = expires
	s.cache.put(epoch, raw, p, expires)
	return p, nil
}

// notifyTokensOf drops the tokens userID made from every replica's cache
// at commit (RunRevocations), as their sessions are: Disable calls it, and
// the tokens' next requests are checked against the disabled creator.
func notifyTokensOf(ctx context.Context, q store.Querier, userID string) error {
	if _, err := q.Exec(ctx, `SELECT pg_notify('`+RevokedChannel+`', id) FROM api_tokens
		WHERE created_by = $1 AND revoked_at IS NULL`, userID); err != nil {
		return fmt.Errorf("tokens of %s: %w", userID, err)
	}
	return nil
}

// LiveTokenIDs are the ids of projectID's tokens that can act at now:
// neither revoked nor expired.
func (s *Service) LiveTokenIDs(ctx context.Context, q store.Querier, projectID string, now time.Time) (map[string]bool, error) {
	rows, err := q.Query(ctx, `SELECT id FROM api_tokens WHERE project_id = $1 AND revoked_at IS NULL AND expires_at > $2`,
		projectID, now.UTC())
	if err != nil {
		return nil, fmt.Errorf("live tokens of %s: %w", projectID, err)
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, fmt.Errorf("live tokens of %s: %w", projectID, err)
	}
	live := make(map[string]bool, len(ids))
	for _, id := range ids {
		live[id] = true
	}
	return live, nil
}
