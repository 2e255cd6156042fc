package node_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/gpuaas/gpuaas/controld/endpoint/endpointtest"
	"github.com/gpuaas/gpuaas/controld/node"
	"github.com/gpuaas/gpuaas/controld/storetest"
	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/hostproto"
)

// TestEnrollTokenRefusals: an unknown shape or a bad node name is
// invalid_argument, a name already enrolled a conflict; none stores a
// token.
func TestEnrollTokenRefusals(t *testing.T) {
	pool := newPool(t)
	ctx := context.Background()
	slicedNode(t, pool, "gpu-1", 1)
	for _, tc := range []struct {
		name string
		req  api.EnrollTokenRequest
		want api.Code
	}{
		{"unknown shape", api.EnrollTokenRequest{Name: "gpu-2", Shape: "container"}, api.CodeInvalidArgument},
		{"empty name", api.EnrollTokenRequest{Name: ""}, api.CodeInvalidArgument},
		{"upper case", api.EnrollTokenRequest{Name: "GPU-2"}, api.CodeInvalidArgument},
		{"leading dash", api.EnrollTokenRequest{Name: "-gpu"}, api.CodeInvalidArgument},
		{"too long", api.EnrollTokenRequest{Name: strings.Repeat("a", 64)}, api.CodeInvalidArgument},
		{"enrolled already", api.EnrollTokenRequest{Name: "gpu-1"}, api.CodeConflict},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := inTx(pool, func(tx pgx.Tx) error {
				_, _, err := node.CreateEnrollToken(ctx, tx, tc.req, "u-op", t0)
				return err
			})
			endpointtest.WantCode(t, tc.name, err, tc.want)
			if n := storetest.Count(t, pool, `SELECT count(*) FROM enrollment_tokens`); n != 0 {
				t.Errorf("tokens after a refusal: got %d; want 0", n)
			}
		})
	}
}

// TestEnrollOnce: a token creates its node once, in the transaction
// that spends it, and queues the node's health probe and topology
// discovery; a second use, an unknown token and an expired one are
// unauthenticated and create nothing.
func TestEnrollOnce(t *testing.T) {
	pool := newPool(t)
	ctx := context.Background()
	token := func(name string) api.EnrollTokenResponse {
		var resp api.EnrollTokenResponse
		if err := inTx(pool, func(tx pgx.Tx) error {
			r, e, err := node.CreateEnrollToken(ctx, tx, api.EnrollTokenRequest{Name: name}, "u-op", t0)
			if err == nil && (e.Audit.Action != "node.enroll_token" || len(e.Events) != 1 || e.Events[0].Kind != api.EventNode) {
				t.Errorf("token's effect: got %+v; want its audit action and one node event", e)
			}
			resp = r
			return err
		}); err != nil {
			t.Fatal(err)
		}
		return resp
	}
	tok := token("gpu-1")
	if !node.IsEnrollToken(tok.Token) || tok.Shape != api.ShapeGPUSlice || !tok.ExpiresAt.Equal(t0.Add(node.EnrollTokenTTL)) {
		t.Errorf("token: got %+v; want a gpe_ token for gpu_slice expiring after %v", tok, node.EnrollTokenTTL)
	}
	var stored int
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM enrollment_tokens WHERE position($1 in encode(token_hash, 'escape')) > 0`,
		tok.Token).Scan(&stored); err != nil || stored != 0 {
		t.Errorf("token stored in clear: %d rows, %v; want only its hash", stored, err)
	}
	enroll := func(token string, at time.Time) (node.Enrolled, error) {
		var n node.Enrolled
		err := inTx(pool, func(tx pgx.Tx) error {
			var err error
			n, err = node.Enroll(ctx, tx, hostproto.EnrollRequest{Token: token, PublicKey: []byte("key-" + token), Version: "1"}, "10.0.0.0/24", at)
			return err
		})
		return n, err
	}
	n, err := enroll(" "+tok.Token+"\n", t0.Add(time.Minute)) // pasted with blanks
	if err != nil {
		t.Fatal(err)
	}
	if n.Name != "gpu-1" || n.Shape != api.ShapeGPUSlice {
		t.Errorf("enrolled: got %+v; want gpu-1, gpu_slice", n)
	}
	if c := storetest.Count(t, pool, `SELECT count(*) FROM nodes WHERE id = $1 AND state = 'enrolled'`, n.ID); c != 1 {
		t.Errorf("enrolled nodes: got %d; want 1", c)
	}
	var types []string
	rows, _ := pool.Query(ctx, `SELECT type FROM node_tasks WHERE node_id = $1 ORDER BY type`, n.ID)
	types, err = pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil || strings.Join(types, ",") != api.TaskHealthProbe+","+api.TaskTopologyDiscover {
		t.Errorf("queued tasks: got %v, %v; want the health probe and the topology discovery", types, err)
	}
	expired := token("gpu-2")
	for _, tc := range []struct {
		name, token string
		at          time.Time
	}{
		{"second use", tok.Token, t0.Add(2 * time.Minute)},
		{"unknown", "gpe_nope", t0},
		{"expired", expired.Token, t0.Add(node.EnrollTokenTTL)},
	} {
		_, err := enroll(tc.token, tc.at)
		endpointtest.WantCode(t, tc.name, err, api.CodeUnauthenticated)
	}
	if c := storetest.Count(t, pool, `SELECT count(*) FROM nodes`); c != 1 {
		t.Errorf("nodes after refused enrollments: got %d; want 1", c)
	}
	if c := storetest.Count(t, pool, `SELECT count(*) FROM enrollment_tokens WHERE used_at IS NULL`); c != 1 {
		t.Errorf("unspent tokens: got %d; want the expired one", c)
	}
}
