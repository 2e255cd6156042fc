package busauth_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/gpuaas/gpuaas/controld/busauth"
	"github.com/gpuaas/gpuaas/controld/endpoint"
	"github.com/gpuaas/gpuaas/controld/endpoint/endpointtest"
	"github.com/gpuaas/gpuaas/controld/identity"
	"github.com/gpuaas/gpuaas/controld/mutate"
	"github.com/gpuaas/gpuaas/controld/store"
	"github.com/gpuaas/gpuaas/controld/storetest"
	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/testutil"
)

var pgTemplate = storetest.Template("busauth")

var epoch = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

// busServed is the bus identities' endpoints over a fresh database.
type busServed struct {
	pool *pgxpool.Pool
	run  *mutate.Runner
	defs []endpoint.Def
	now  func() time.Time
}

func serveBus(t *testing.T) *busServed {
	t.Helper()
	pool, err := store.Open(context.Background(), testutil.Postgres(t, pgTemplate), 4)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	clock := func() time.Time { return epoch }
	return &busServed{pool: pool, run: &mutate.Runner{Pool: pool, Now: clock}, now: clock,
		defs: busauth.Endpoints(busauth.Deps{DB: pool, Now: clock})}
}

var op = &endpoint.Request{Principal: &identity.Principal{UserID: "u-op", Role: api.RoleOperator}}

func (s *busServed) count(t *testing.T, sql string, args ...any) int {
	t.Helper()
	var n int
	if err := s.pool.QueryRow(context.Background(), sql, args...).Scan(&n); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
	return n
}

// written is every row the endpoints write: keys (live ones counted
// apart), audit rows, events and idempotency records.
func (s *busServed) written(t *testing.T) [5]int {
	t.Helper()
	var w [5]int
	for i, sql := range []string{`SELECT count(*) FROM bus_identities`, `SELECT count(*) FROM bus_identities WHERE revoked_at IS NULL`,
		`SELECT count(*) FROM audit_logs`, `SELECT count(*) FROM outbox_events`, `SELECT count(*) FROM idempotency_keys`} {
		w[i] = s.count(t, sql)
	}
	return w
}

func (s *busServed) add(t *testing.T, kind, name string) api.BusIdentity {
	t.Helper()
	_, pub := newKey(t)
	id, err := endpointtest.Mutate[api.BusIdentity](context.Background(), s.run, endpointtest.Find(t, s.defs, api.EndpointBusIdentityAdd),
		op, api.BusIdentityAddRequest{PublicKey: pub, Kind: kind, Name: name})
	if err != nil {
		t.Fatalf("add %s %s: %v", kind, name, err)
	}
	return *id
}

// TestRevokeOfAnUnknownKeyChangesNothing: bus.identity.revoke of a name
// or a key no live identity has is not_found and writes nothing, not
// even to the keys it did not match; a revoked key is not revoked twice.
func TestRevokeOfAnUnknownKeyChangesNothing(t *testing.T) {
	ctx := context.Background()
	s := serveBus(t)
	gw := s.add(t, api.BusIdentityGateway, "gw-1")
	revoke := endpointtest.Find(t, s.defs, api.EndpointBusIdentityRevoke)
	_, stranger := newKey(t)
	before := s.written(t)
	for _, req := range []api.BusIdentityRevokeRequest{{Name: "gw-2"}, {PublicKey: stranger}} {
		if _, err := endpointtest.Mutate[api.BusIdentityRevokeResponse](ctx, s.run, revoke, op, req); !errors.Is(err, api.ErrNotFound) {
			t.Errorf("revoke %+v: got %v; want not_found", req, err)
		}
	}
	if _, err := endpointtest.Mutate[api.BusIdentityRevokeResponse](ctx, s.run, revoke, op,
		api.BusIdentityRevokeRequest{Name: "gw-1", PublicKey: gw.PublicKey}); !errors.Is(err, api.ErrInvalidArgument) {
		t.Errorf("revoke by name and key at once: got %v; want invalid_argument", err)
	}
	if after := s.written(t); after != before {
		t.Fatalf("rows after refused revocations: %v; want %v", after, before)
	}

	if _, err := endpointtest.Mutate[api.BusIdentityRevokeResponse](ctx, s.run, revoke, op, api.BusIdentityRevokeRequest{PublicKey: gw.PublicKey}); err != nil {
		t.Fatal(err)
	}
	before = s.written(t)
	if _, err := endpointtest.Mutate[api.BusIdentityRevokeResponse](ctx, s.run, revoke, op, api.BusIdentityRevokeRequest{Name: "gw-1"}); !errors.Is(err, api.ErrNotFound) {
		t.Errorf("revoking a revoked key again: got %v; want not_found", err)
	}
	if after := s.written(t); after != before {
		t.Fatalf("rows after revoking a revoked key: %v; want %v", after, before)
	}
}

// TestRevokeByNameRevokesEveryLiveKey: a name's live keys are revoked
// together, in one audit row and one event listing them all (controld
// closes their connections from it); another name's key stays.
func TestRevokeByNameRevokesEveryLiveKey(t *testing.T) {
	ctx := context.Background()
	s := serveBus(t)
	a, b := s.add(t, api.BusIdentityGateway, "gw-1"), s.add(t, api.BusIdentityGateway, "gw-1")
	other := s.add(t, api.BusIdentityOperator, "ops-1")
	got, err := endpointtest.Mutate[api.BusIdentityRevokeResponse](ctx, s.run, endpointtest.Find(t, s.defs, api.EndpointBusIdentityRevoke),
		op, api.BusIdentityRevokeRequest{Name: "gw-1"})
	if err != nil || len(got.Revoked) != 2 {
		t.Fatalf("revoke gw-1: %+v, %v; want its two keys", got, err)
	}
	if n := s.count(t, `SELECT count(*) FROM bus_identities WHERE revoked_at = $1 AND public_key IN ($2, $3)`, epoch, a.PublicKey, b.PublicKey); n != 2 {
		t.Fatalf("gw-1's keys revoked at the injected time: %d; want 2", n)
	}
	if _, err := busauth.LiveIdentity(ctx, s.pool, other.PublicKey); err != nil {
		t.Fatalf("ops-1's key after revoking gw-1: %v; want it live", err)
	}
	if n := s.count(t, `SELECT count(*) FROM audit_logs WHERE action = $1 AND detail->'keys' ? $2 AND detail->'keys' ? $3`,
		api.EndpointBusIdentityRevoke, a.PublicKey, b.PublicKey); n != 1 {
		t.Fatalf("audit rows naming both keys: %d; want 1", n)
	}
	if n := s.count(t, `SELECT count(*) FROM outbox_events WHERE kind = $1 AND jsonb_array_length(payload->'revoked') = 2
		AND users = ARRAY['u-op']`, api.EventBusIdentityRevoked); n != 1 {
		t.Fatalf("revocation events listing both keys: %d; want 1", n)
	}
}

// TestEnsureIdentityIsIdempotent: EnsureIdentity registers a key once,
// as bus.identity.add does (audit row, event), and finds it registered
// on the next call without writing; a bad key is refused, nothing
// written.
func TestEnsureIdentityIsIdempotent(t *testing.T) {
	ctx := context.Background()
	s := serveBus(t)
	_, pub := newKey(t)
	req := api.BusIdentityAddRequest{PublicKey: pub, Kind: api.BusIdentityGateway, Name: "gw-dev"}
	first, err := busauth.EnsureIdentity(ctx, s.pool, s.run, req, "u-op", s.now)
	if err != nil || first.PublicKey != pub || first.CreatedBy != "u-op" || !first.CreatedAt.Equal(epoch) {
		t.Fatalf("first ensure: %+v, %v", first, err)
	}
	before := s.written(t)
	if before != [5]int{1, 1, 1, 1, 1} {
		t.Fatalf("rows after the first ensure: %v; want one of each", before)
	}
	again, err := busauth.EnsureIdentity(ctx, s.pool, s.run, req, "u-other", s.now)
	if err != nil || again.PublicKey != pub || again.CreatedBy != "u-op" {
		t.Fatalf("second ensure: %+v, %v; want the first registration", again, err)
	}
	if _, err := busauth.EnsureIdentity(ctx, s.pool, s.run, api.BusIdentityAddRequest{PublicKey: "not-a-key",
		Kind: api.BusIdentityGateway, Name: "gw-dev"}, "u-op", s.now); !errors.Is(err, api.ErrInvalidArgument) {
		t.Fatalf("ensure of a bad key: got %v; want invalid_argument", err)
	}
	if after := s.written(t); after != before {
		t.Fatalf("rows after the second ensure and a bad key: %v; want %v", after, before)
	}
}
