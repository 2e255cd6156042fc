package node

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base32"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/gpuaas/gpuaas/controld/audit"
	"github.com/gpuaas/gpuaas/controld/mutate"
	"github.com/gpuaas/gpuaas/controld/outbox"
	"github.com/gpuaas/gpuaas/controld/tasks"
	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/hostproto"
	"github.com/gpuaas/gpuaas/internal/ids"
)

// EnrollTokenTTL is how long an enrollment token stays usable.
const EnrollTokenTTL = time.Hour

// enrollTokenPrefix starts every enrollment token.
const enrollTokenPrefix = "gpe_"

// IsEnrollToken reports whether token has the form of an enrollment token
// (not whether it is valid: enrollment checks that).
func IsEnrollToken(token string) bool { return strings.HasPrefix(token, enrollTokenPrefix) }

var tokenEncoding = base32.StdEncoding.WithPadding(base32.NoPadding)

func hashToken(token string) []byte {
	h := sha256.Sum256([]byte(strings.TrimSpace(token)))
	return h[:]
}

// CreateEnrollToken makes a one-time token for a node to be named name.
// Only its hash is stored; the token is shown once.
func CreateEnrollToken(ctx context.Context, tx pgx.Tx, req api.EnrollTokenRequest, actor string, now time.Time) (api.EnrollTokenResponse, mutate.Effect, error) {
	var eff mutate.Effect
	if req.Shape == "" {
		req.Shape = api.DefaultShape
	}
	if !api.KnownShape(req.Shape) {
		return api.EnrollTokenResponse{}, eff, api.Errorf(api.CodeInvalidArgument, "unknown shape %q", req.Shape).
			WithHint("use gpu_slice or baremetal")
	}
	if !validNodeName(req.Name) {
		return api.EnrollTokenResponse{}, eff, api.Errorf(api.CodeInvalidArgument, "%q is not a valid node name", req.Name).
			WithHint("use 1–63 lower-case letters, digits, dots and dashes")
	}
	var exists bool
	if err := tx.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM nodes WHERE name = $1)`, req.Name).Scan(&exists); err != nil {
		return api.EnrollTokenResponse{}, eff, fmt.Errorf("check node name: %w", err)
	}
	if exists {
		return api.EnrollTokenResponse{}, eff, api.Errorf(api.CodeConflict, "node %q is already enrolled", req.Name)
	}
	var raw [20]byte
	_, _ = rand.Read(raw[:])
	token := enrollTokenPrefix + strings.ToLower(tokenEncoding.EncodeToString(raw[:]))
	id := ids.New("e")
	exp := now.Add(EnrollTokenTTL)
	if _, err := tx.Exec(ctx, `INSERT INTO enrollment_tokens (id, node_name, shape, token_hash, created_by, created_at, expires_at, test_node)
		VALUES ($1,$2,$3,$4,$5,$6,$7,$8)`, id, req.Name, req.Shape, hashToken(token), actor, now, exp, req.Test); err != nil {
		return api.EnrollTokenResponse{}, eff, fmt.Errorf("store enrollment token: %w", err)
	}
	eff.Audit = audit.Entry{Action: "node.enroll_token", TargetType: "enrollment", TargetID: id,
		Detail: map[string]string{"name": req.Name, "shape": req.Shape, "test": strconv.FormatBool(req.Test)}}
	eff.Events = []outbox.Event{{Kind: api.EventNode, Subject: id, Users: []string{actor},
		Payload: map[string]string{"enrollment": id, "name": req.Name}}}
	return api.EnrollTokenResponse{Name: req.Name, Shape: req.Shape, Token: token, ExpiresAt: exp}, eff, nil
}

func validNodeName(s string) bool {
	if len(s) == 0 || len(s) > 63 {
		return false
	}
	for i, r := range s {
		ok := r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || (i > 0 && (r == '-' || r == '.'))
		if !ok {
			return false
		}
	}
	return true
}

// Enrolled is a node that enrollment just created.
type Enrolled struct {
	ID, Name, Shape string
}

// Enroll creates a node with a one-time token, in tx: the token must
// exist, be unused and unexpired; it is spent in the same transaction
// that creates the node, so a second use fails. The node is then asked to
// report its health and discover its topology (candidate slots on subnet).
func Enroll(ctx context.Context, tx pgx.Tx, req hostproto.EnrollRequest, subnet string, now time.Time) (Enrolled, error) {
	var tokID string
	var n Enrolled
	var expires time.Time
	var used *time.Time
	var test bool
	err := tx.QueryRow(ctx, `SELECT id, node_name, shape, expires_at, used_at, test_node FROM enrollment_tokens
		WHERE token_hash = $1 FOR UPDATE`, hashToken(req.Token)).Scan(&tokID, &n.Name, &n.Shape, &expires, &used, &test)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return Enrolled{}, api.Errorf(api.CodeUnauthenticated, "unknown enrollment token").
			WithHint("ask an operator for a token: `gpuaas node enroll --name NAME`")
	case err != nil:
		return Enrolled{}, fmt.Errorf("enroll: %w", err)
	case used != nil:
		return Enrolled{}, api.Errorf(api.CodeUnauthenticated, "this enrollment token was already used").
			WithHint("tokens are single-use; ask an operator for a new one")
	case !now.Before(expires):
		return Enrolled{}, api.Errorf(api.CodeUnauthenticated, "this enrollment token expired at %s", expires.Format(time.RFC3339))
	}
	n.ID = ids.New(ids.Node)
	if _, err := tx.Exec(ctx, `INSERT INTO nodes (id, name, shape, gpu_model, state, created_at, updated_at,
		public_key, terminal_addr, terminal_host_key, hostd_version, last_heartbeat_at, test_node)
		VALUES ($1,$2,$3,'','enrolled',$4,$4,$5,$6,$7,$8,$4,$9)`,
		n.ID, n.Name, n.Shape, now, []byte(req.PublicKey), req.TerminalAddr, req.TerminalHostKey, req.Version, test); err != nil {
		return Enrolled{}, fmt.Errorf("create node: %w", err)
	}
	if _, err := tx.Exec(ctx, `UPDATE enrollment_tokens SET used_at = $2, node_id = $3 WHERE id = $1`, tokID, now, n.ID); err != nil {
		return Enrolled{}, fmt.Errorf("spend token: %w", err)
	}
	for _, t := range []tasks.Task{
		{NodeID: n.ID, Type: api.TaskHealthProbe},
		{NodeID: n.ID, Type: api.TaskTopologyDiscover, Params: hostproto.TopologyDiscoverParams{Shape: n.Shape, Subnet: subnet}},
	} {
		if _, err := tasks.Enqueue(ctx, tx, t, now); err != nil {
			return Enrolled{}, err
		}
	}
	return n, nil
}
