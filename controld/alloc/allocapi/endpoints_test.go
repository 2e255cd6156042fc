package allocapi_test

import (
	"context"
	"testing"
	"time"

	"github.com/gpuaas/gpuaas/controld/alloc"
	"github.com/gpuaas/gpuaas/controld/endpoint/endpointtest"
	"github.com/gpuaas/gpuaas/controld/storetest"
	"github.com/gpuaas/gpuaas/internal/api"
)

// TestCreateRefusedForFundsIsAuditedAlone: a create an unfunded project
// cannot afford is insufficient_funds, leaves no allocation, and is
// recorded as alloc.create_refused under the request's Idempotency-Key
// and correlation id, in a write of its own; a create refused for
// anything else (an unknown SKU, refused in the same transaction) is not
// recorded.
func TestCreateRefusedForFundsIsAuditedAlone(t *testing.T) {
	t.Parallel()
	s := serve(t)
	s.rules = alloc.Rules{MinRunway: time.Hour}
	_, err := s.create(t, "k-funds", api.AllocCreateRequest{SKU: "h200-slice", GPUs: 1})
	wantCode(t, "unfunded", err, api.CodeInsufficientFunds)
	if n := s.count(t, `SELECT count(*) FROM allocations`); n != 0 {
		t.Errorf("allocations after the refusal: got %d; want 0", n)
	}
	if n := s.count(t, `SELECT count(*) FROM audit_logs WHERE action = 'alloc.create_refused' AND actor_id = $1
		AND project_id = $2 AND target_id = $2 AND idempotency_key = 'k-funds' AND correlation_id = 'corr-k-funds'`,
		s.user, s.one); n != 1 {
		t.Errorf("alloc.create_refused rows of the refusal: got %d; want 1", n)
	}
	before := s.written(t)
	_, err = s.create(t, "k-sku", api.AllocCreateRequest{SKU: "no-such-sku", GPUs: 1})
	wantCode(t, "unknown SKU", err, api.CodeNotFound)
	if after := s.written(t); after != before {
		t.Errorf("the unknown SKU's refusal wrote %d rows; want none", after-before)
	}
}

// TestCreateSetsItsIdlePolicy: a create's idle period and maximum
// duration are checked before its transaction (below the server's
// minimum: invalid_argument, nothing written) and recorded with the
// allocation, in its transaction.
func TestCreateSetsItsIdlePolicy(t *testing.T) {
	t.Parallel()
	s := serve(t)
	for _, tc := range []struct {
		name string
		req  api.AllocCreateRequest
	}{
		{"idle period under the minimum", api.AllocCreateRequest{SKU: "h200-slice", GPUs: 1, IdleReleaseAfter: "30s"}},
		{"maximum duration not a duration", api.AllocCreateRequest{SKU: "h200-slice", GPUs: 1, MaxDuration: "forever"}},
		{"no GPUs", api.AllocCreateRequest{SKU: "h200-slice", GPUs: 0}},
	} {
		_, err := s.create(t, "k-"+tc.name, tc.req)
		wantCode(t, tc.name, err, api.CodeInvalidArgument)
	}
	if n := s.written(t); n != 0 {
		t.Fatalf("refused creates wrote %d rows; want none", n)
	}
	a, err := s.create(t, "k-ok", api.AllocCreateRequest{SKU: "h200-slice", GPUs: 1, IdleReleaseAfter: "2h", MaxDuration: "24h"})
	if err != nil {
		t.Fatal(err)
	}
	if n := s.count(t, `SELECT count(*) FROM idle_allocations WHERE allocation_id = $1
		AND idle_release_after_s = 7200 AND max_duration_s = 86400`, a.ID); n != 1 {
		t.Errorf("idle policy rows of %s (2h, 24h): got %d; want 1", a.ID, n)
	}
}

// TestQuoteWritesNothing: alloc.quote answers what the create would
// (the price, the funds that fall short of the minimum runway, and that
// top-ups are off on this platform) and writes nothing, not even the
// refusal's audit row.
func TestQuoteWritesNothing(t *testing.T) {
	t.Parallel()
	s := serve(t)
	s.rules = alloc.Rules{MinRunway: time.Hour, TopupsOff: true}
	q, err := endpointtest.Read[api.AllocQuote](context.Background(), endpointtest.Find(t, s.defs, api.EndpointAllocQuote),
		as(t, s.user, s.one, ""), api.AllocCreateRequest{SKU: "h200-slice", GPUs: 2})
	if err != nil {
		t.Fatal(err)
	}
	if q.ProjectID != s.one || q.PricePerHourMinor != 700 || !q.InsufficientFunds || !q.TopupsOff ||
		q.MinRunwaySeconds != 3600 || q.NeededMinor != 700 || q.BalanceMinor == nil || *q.BalanceMinor != 0 {
		t.Errorf("quote: got %+v; want project %s, 700/h, 700 needed for an hour, balance 0, insufficient, top-ups off",
			q, s.one)
	}
	if n := s.written(t); n != 0 {
		t.Errorf("the quote wrote %d rows; want none", n)
	}
}

// TestListDefaultsToTheHeadersProject: alloc.list naming no project
// lists the Gpuaas-Project header's; one that names a project lists
// that one.
func TestListDefaultsToTheHeadersProject(t *testing.T) {
	t.Parallel()
	s := serve(t)
	inOne := storetest.Allocation(t, s.pool, api.Allocation{ProjectID: s.one, UserID: s.user, SKU: "h200-slice",
		Shape: api.ShapeGPUSlice, GPUs: 1, Queued: true})
	inTwo := storetest.Allocation(t, s.pool, api.Allocation{ProjectID: s.two, UserID: s.user, SKU: "h200-slice",
		Shape: api.ShapeGPUSlice, GPUs: 1, Queued: true})
	list := endpointtest.Find(t, s.defs, api.EndpointAllocList)
	for _, tc := range []struct {
		name, header string
		req          api.AllocListRequest
		want         string
	}{
		{"header one", s.one, api.AllocListRequest{}, inOne.ID},
		{"header two", s.two, api.AllocListRequest{}, inTwo.ID},
		{"named over the header", s.one, api.AllocListRequest{Project: s.two}, inTwo.ID},
	} {
		resp, err := endpointtest.Read[api.AllocListResponse](context.Background(), list, as(t, s.user, tc.header, ""), tc.req)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		var got []string
		for _, a := range resp.Allocations {
			got = append(got, a.ID)
		}
		if len(got) != 1 || got[0] != tc.want {
			t.Errorf("%s: got %v; want [%s]", tc.name, got, tc.want)
		}
	}
}

// TestReleaseWakesTheQueueOnlyWhenReleased: withdrawing a request still
// in the queue releases it at once and wakes the scheduler's queue loop
// (the queue is first come, first served: the request behind it may be
// placed now); releasing a placed allocation only starts its release on
// its node, which frees nothing yet (the node's report does, later), so
// nothing is woken. A reason with control characters is refused before
// the transaction.
func TestReleaseWakesTheQueueOnlyWhenReleased(t *testing.T) {
	t.Parallel()
	s := serve(t)
	ctx := context.Background()
	release := endpointtest.Find(t, s.defs, api.EndpointAllocRelease)
	queued := storetest.Allocation(t, s.pool, api.Allocation{ProjectID: s.one, UserID: s.user, SKU: "h200-slice",
		Shape: api.ShapeGPUSlice, GPUs: 1, Queued: true})
	_, err := endpointtest.Mutate[api.Allocation](ctx, s.run, release, as(t, s.user, s.one, "k-bad"),
		api.AllocReleaseRequest{ID: queued.ID, Reason: "bad\x1b[2J"})
	wantCode(t, "control characters", err, api.CodeInvalidArgument)
	a, err := endpointtest.Mutate[api.Allocation](ctx, s.run, release, as(t, s.user, s.one, "k-queued"),
		api.AllocReleaseRequest{ID: queued.ID})
	if err != nil || a.State != api.AllocReleased {
		t.Fatalf("release of the queued request: got %+v, %v; want released", a, err)
	}
	if got := s.kicks.Load(); got != 1 {
		t.Errorf("wake-ups after the queued request's release: got %d; want 1", got)
	}
	placed, err := s.create(t, "k-create", api.AllocCreateRequest{SKU: "h200-slice", GPUs: 1})
	if err != nil || placed.State != api.AllocProvisioning {
		t.Fatalf("create: got %+v, %v; want provisioning", placed, err)
	}
	a, err = endpointtest.Mutate[api.Allocation](ctx, s.run, release, as(t, s.user, s.one, "k-placed"),
		api.AllocReleaseRequest{ID: placed.ID})
	if err != nil || a.State == api.AllocReleased {
		t.Fatalf("release of the placed allocation: got %+v, %v; want it releasing on its node", a, err)
	}
	if got := s.kicks.Load(); got != 1 {
		t.Errorf("wake-ups after the placed allocation's release: got %d; want still 1", got)
	}
}
