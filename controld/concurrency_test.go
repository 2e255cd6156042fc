package controld_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/gpuaas/gpuaas/controld/alloc"
	"github.com/gpuaas/gpuaas/controld/controldtest"
	"github.com/gpuaas/gpuaas/controld/node"
	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/testutil"
)

// numaGroup is a NUMA node of a test node, by node name.
type numaGroup struct {
	node string
	numa int
}

// h200SliceNodes returns n H200 slice nodes named n0, n1, ...
func h200SliceNodes(n int) []node.Spec {
	out := make([]node.Spec, n)
	for i := range out {
		out[i] = controldtest.SliceNode(fmt.Sprintf("n%d", i), "H200")
	}
	return out
}

// occupyAllBut reserves every H200 slot for one new filler allocation
// except keep[g] slots of each group g (the lowest indexes), and returns
// the filler's id. The filler is made through the API so that it is real.
// Slots of earlier allocations are taken back.
func occupyAllBut(t *testing.T, env *controldtest.Env, keep map[numaGroup]int) string {
	t.Helper()
	ctx := context.Background()
	const freeAll = `UPDATE slots SET state = 'free', allocation_id = NULL WHERE state = 'reserved'`
	if _, err := env.Server.Pool().Exec(ctx, freeAll); err != nil { // room for the filler
		t.Fatal(err)
	}
	filler, err := env.Client(env.AdminToken).AllocCreate(ctx, api.AllocCreateRequest{SKU: "h200-slice", GPUs: 1})
	if err != nil {
		t.Fatalf("filler: %v", err)
	}
	err = pgx.BeginFunc(ctx, env.Server.Pool(), func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, freeAll); err != nil {
			return err
		}
		for g, k := range keep {
			if _, err := tx.Exec(ctx, `UPDATE slots SET state = 'disabled' WHERE id IN (SELECT s.id FROM slots s
				JOIN nodes n ON n.id = s.node_id WHERE n.name = $1 AND s.numa_node = $2 ORDER BY s.idx LIMIT $3)`,
				g.node, g.numa, k); err != nil {
				return err
			}
		}
		// Kept slots were parked as disabled so this reserves all others.
		if _, err := tx.Exec(ctx, `UPDATE slots SET state = 'reserved', allocation_id = $1 WHERE state = 'free'`, filler.ID); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, `UPDATE slots SET state = 'free' WHERE state = 'disabled'`)
		return err
	})
	if err != nil {
		t.Fatalf("occupy slots: %v", err)
	}
	return filler.ID
}

func sqlCount(t *testing.T, env *controldtest.Env, sql string, args ...any) int {
	t.Helper()
	var n int
	if err := env.Server.Pool().QueryRow(context.Background(), sql, args...).Scan(&n); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
	return n
}

// TestAllocCreateRaceForLastSlots has 32 clients race for the last free
// slots: exactly as many as fit succeed, the rest get no_capacity, and the
// database shows every slot held by at most one allocation.
func TestAllocCreateRaceForLastSlots(t *testing.T) {
	t.Parallel()
	const racers = 32
	tests := []struct {
		name string
		gpus int
		free map[numaGroup]int
		want int // successes: Σ over nodes of ⌊free/gpus⌋
	}{
		{"1 GPU, 5 slots left", 1, map[numaGroup]int{{"n0", 0}: 1, {"n1", 1}: 2, {"n3", 0}: 2}, 5},
		{"1 GPU, 1 slot left", 1, map[numaGroup]int{{"n2", 1}: 1}, 1},
		{"1 GPU, 12 slots left in whole groups", 1, map[numaGroup]int{{"n0", 0}: 4, {"n1", 1}: 4, {"n2", 0}: 4}, 12},
		{"1 GPU, 20 slots left", 1, map[numaGroup]int{{"n0", 0}: 4, {"n0", 1}: 4, {"n1", 1}: 4, {"n2", 0}: 4, {"n3", 0}: 3, {"n3", 1}: 1}, 20},
		{"2 GPUs, 4 pairs left", 2, map[numaGroup]int{{"n0", 0}: 2, {"n1", 0}: 2, {"n1", 1}: 2, {"n3", 1}: 2}, 4},
		{"2 GPUs, some pairs only across NUMA nodes", 2, map[numaGroup]int{{"n0", 0}: 1, {"n0", 1}: 1, {"n2", 0}: 3, {"n2", 1}: 1, {"n3", 0}: 1}, 3},
		{"2 GPUs, 12 pairs left", 2, map[numaGroup]int{{"n0", 0}: 4, {"n0", 1}: 4, {"n1", 0}: 4, {"n1", 1}: 4, {"n2", 0}: 4, {"n3", 1}: 4}, 12},
	}
	// One controld for every round: each round re-lays the slots and
	// checks only what its own racers did.
	env := controldtest.Start(t, controldtest.Options{Nodes: h200SliceNodes(4)})
	c := env.Client(env.AdminToken)
	ctx := context.Background()
	for round, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			filler := occupyAllBut(t, env, tt.free)
			before := sqlCount(t, env, `SELECT count(*) FROM allocations`)

			var wg sync.WaitGroup
			start := make(chan struct{})
			allocs := make([]*api.Allocation, racers)
			errs := make([]error, racers)
			for i := range racers {
				wg.Go(func() {
					<-start
					allocs[i], errs[i] = c.AllocCreate(ctx, api.AllocCreateRequest{SKU: "h200-slice", GPUs: tt.gpus},
						api.WithIdempotencyKey(fmt.Sprintf("race-%d-%d", round, i)))
				})
			}
			close(start)
			wg.Wait()

			won := map[string]*api.Allocation{}
			owner := map[string]string{} // slot → allocation, from the replies
			for i, err := range errs {
				switch {
				case err == nil:
					a := allocs[i]
					won[a.ID] = a
					if a.State != api.AllocProvisioning || len(a.Slots) != tt.gpus {
						t.Errorf("racer %d got %s with %d slots; want provisioning with %d", i, a.State, len(a.Slots), tt.gpus)
					}
					for _, s := range a.Slots {
						if prev, dup := owner[s.ID]; dup {
							t.Errorf("slot %s given to %s and %s", s.ID, prev, a.ID)
						}
						owner[s.ID] = a.ID
					}
				case !errors.Is(err, api.ErrNoCapacity):
					t.Errorf("racer %d got %v; want success or no_capacity", i, err)
				}
			}
			if len(won) != tt.want {
				t.Errorf("successes got %d; want %d", len(won), tt.want)
			}
			checkSlotOwnership(t, env, filler, won, tt.gpus)
			if n := sqlCount(t, env, `SELECT count(*) FROM allocations`) - before; n != len(won) {
				t.Errorf("allocation rows got %d; want %d (failed requests must leave none)", n, len(won))
			}
			if n := sqlCount(t, env, `SELECT count(*) FROM (SELECT node_id FROM slots WHERE state = 'free'
				GROUP BY node_id HAVING count(*) >= $1) fits`, tt.gpus); n != 0 {
				t.Errorf("nodes that still fit %d GPUs got %d; want 0 (capacity left unused while requests failed)", tt.gpus, n)
			}
		})
	}
}

// checkSlotOwnership compares the slots table with the winning replies:
// each winner holds exactly its reply's slots, on one node, and nothing
// else holds a slot besides the filler.
func checkSlotOwnership(t *testing.T, env *controldtest.Env, filler string, won map[string]*api.Allocation, gpus int) {
	t.Helper()
	rows, err := env.Server.Pool().Query(context.Background(), `SELECT allocation_id, array_agg(id ORDER BY id),
		count(DISTINCT node_id) FROM slots WHERE allocation_id <> $1 GROUP BY allocation_id`, filler)
	if err != nil {
		t.Fatal(err)
	}
	type holding struct {
		alloc string
		slots []string
		nodes int
	}
	held, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (holding, error) {
		var h holding
		return h, r.Scan(&h.alloc, &h.slots, &h.nodes)
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(held) != len(won) {
		t.Errorf("allocations holding slots got %d; want %d", len(held), len(won))
	}
	for _, h := range held {
		a, ok := won[h.alloc]
		if !ok {
			t.Errorf("allocation %s holds slots %v but its create failed", h.alloc, h.slots)
			continue
		}
		want := make([]string, 0, len(a.Slots))
		for _, s := range a.Slots {
			want = append(want, s.ID)
		}
		slices.Sort(want)
		if !slices.Equal(h.slots, want) || len(h.slots) != gpus || h.nodes != 1 {
			t.Errorf("allocation %s holds %v on %d nodes; want its %d reply slots %v on one node", h.alloc, h.slots, h.nodes, gpus, want)
		}
	}
	if n := sqlCount(t, env, `SELECT count(*) FROM slots WHERE state = 'reserved' AND allocation_id <> $1`, filler); n != len(won)*gpus {
		t.Errorf("reserved slots got %d; want %d", n, len(won)*gpus)
	}
}

// TestAllocReleaseRace releases one allocation from two clients at once,
// several times over: exactly one wins, the other gets conflict, and the
// allocation went to releasing exactly once.
func TestAllocReleaseRace(t *testing.T) {
	t.Parallel()
	env := controldtest.Start(t, controldtest.Options{})
	ctx := context.Background()
	admin := env.Client(env.AdminToken)
	ownerUser, ownerToken := env.AddUser(t, "owner@example.test", api.RoleUser)
	_, opToken := env.AddUser(t, "operator@example.test", api.RoleOperator)
	if _, err := admin.ProjectAddMember(ctx, api.AddMemberRequest{Project: env.Project.Name, Email: ownerUser.Email, Role: api.ProjectMember}); err != nil {
		t.Fatal(err)
	}
	owner, operator := env.Client(ownerToken), env.Client(opToken)
	type releaser struct {
		name string
		c    *api.Client
		req  api.AllocReleaseRequest
	}
	byOwner := releaser{"owner", owner, api.AllocReleaseRequest{}}
	byOperator := releaser{"operator --force", operator, api.AllocReleaseRequest{Force: true}}
	pairs := [][2]releaser{
		{byOwner, byOperator}, {byOperator, byOwner}, {byOwner, byOwner}, {byOperator, byOperator},
	}
	for i := range 12 {
		pair := pairs[i%len(pairs)]
		a, err := owner.AllocCreate(ctx, api.AllocCreateRequest{SKU: "h200-slice", GPUs: 1})
		if err != nil {
			t.Fatalf("round %d: create: %v", i, err)
		}
		var wg sync.WaitGroup
		start := make(chan struct{})
		var errs [2]error
		for j, r := range pair {
			req := r.req
			req.ID = a.ID
			wg.Go(func() {
				<-start
				_, errs[j] = r.c.AllocRelease(ctx, req)
			})
		}
		close(start)
		wg.Wait()
		wins := 0
		for j, err := range errs {
			switch {
			case err == nil:
				wins++
			case !errors.Is(err, api.ErrConflict):
				t.Errorf("round %d: %s got %v; want success or conflict", i, pair[j].name, err)
			}
		}
		if wins != 1 {
			t.Errorf("round %d (%s vs %s): winners got %d (errors %v); want exactly 1", i, pair[0].name, pair[1].name, wins, errs)
		}
		if n := sqlCount(t, env, `SELECT count(*) FROM allocation_transitions WHERE allocation_id = $1 AND to_state = 'releasing'`, a.ID); n != 1 {
			t.Errorf("round %d: transitions to releasing got %d; want 1", i, n)
		}
		if n := sqlCount(t, env, `SELECT count(*) FROM node_tasks WHERE allocation_id = $1 AND type = 'slice.vm_release'`, a.ID); n != 1 {
			t.Errorf("round %d: release tasks got %d; want 1", i, n)
		}
		if n := sqlCount(t, env, `SELECT count(*) FROM audit_logs WHERE target_id = $1 AND action = 'alloc.release'`, a.ID); n != 1 {
			t.Errorf("round %d: release audit rows got %d; want 1", i, n)
		}
		got, err := owner.AllocGet(ctx, a.ID)
		if err != nil || got.State != api.AllocReleasing || got.Version != a.Version+1 {
			t.Errorf("round %d: after the race got %+v, %v; want releasing at version %d", i, got, err, a.Version+1)
		}
		// hostd would free the slots once the release task ran.
		if _, err := node.FreeSlots(ctx, env.Server.Pool(), a.ID); err != nil {
			t.Fatal(err)
		}
	}
}

func getAlloc(t *testing.T, c *api.Client, id string) *api.Allocation {
	t.Helper()
	a, err := c.AllocGet(context.Background(), id)
	if err != nil {
		t.Fatalf("get %s: %v", id, err)
	}
	return a
}

func checkQueued(t *testing.T, a *api.Allocation, what string) {
	t.Helper()
	if a.State != api.AllocRequested || !a.Queued || len(a.Slots) != 0 || a.NodeID != "" {
		t.Errorf("%s got state %s queued=%v with %d slots on %q; want requested, queued, no slots", what, a.State, a.Queued, len(a.Slots), a.NodeID)
	}
}

// fillWithSingles allocates every slot of the H200 fleet one GPU at a
// time, so that tests can free exactly one slot.
func fillWithSingles(t *testing.T, c *api.Client, n int) []*api.Allocation {
	t.Helper()
	out := make([]*api.Allocation, n)
	for i := range out {
		a, err := c.AllocCreate(context.Background(), api.AllocCreateRequest{SKU: "h200-slice", GPUs: 1})
		if err != nil {
			t.Fatalf("fill slot %d: %v", i, err)
		}
		out[i] = a
	}
	return out
}

func freeAllocSlots(t *testing.T, env *controldtest.Env, allocID string) {
	t.Helper()
	if _, err := node.FreeSlots(context.Background(), env.Server.Pool(), allocID); err != nil {
		t.Fatal(err)
	}
}

func TestQueuedAllocationsArePlacedOldestFirst(t *testing.T) {
	t.Parallel()
	env := controldtest.Start(t, controldtest.Options{Nodes: h200SliceNodes(1)})
	c := env.Client(env.AdminToken)
	ctx := context.Background()
	full := fillWithSingles(t, c, 8)
	if _, err := c.AllocCreate(ctx, api.AllocCreateRequest{SKU: "h200-slice", GPUs: 1}); !errors.Is(err, api.ErrNoCapacity) {
		t.Fatalf("create without --queue on a full fleet got %v; want no_capacity", err)
	}
	var queued []*api.Allocation
	for i := range 3 {
		a, err := c.AllocCreate(ctx, api.AllocCreateRequest{SKU: "h200-slice", GPUs: 1, Queue: true})
		if err != nil {
			t.Fatalf("queue %d: %v", i, err)
		}
		checkQueued(t, a, fmt.Sprintf("queued request %d", i))
		queued = append(queued, a)
	}

	for i := range queued {
		freeAllocSlots(t, env, full[i].ID)
		var placed *api.Allocation
		testutil.EventuallyWithin(t, 10*time.Second, fmt.Sprintf("a queued request to be placed after freeing slot %d", i), func() bool {
			for _, q := range queued[i:] {
				if a := getAlloc(t, c, q.ID); a.State != api.AllocRequested {
					placed = a
					return true
				}
			}
			return false
		})
		if placed.ID != queued[i].ID {
			t.Fatalf("after freeing slot %d, %s was placed; want the oldest queued request %s", i, placed.ID, queued[i].ID)
		}
		if placed.State != api.AllocProvisioning || placed.Queued || len(placed.Slots) != 1 {
			t.Errorf("placed request got %s queued=%v with %d slots; want provisioning with 1 slot", placed.State, placed.Queued, len(placed.Slots))
		}
		for _, q := range queued[i+1:] {
			checkQueued(t, getAlloc(t, c, q.ID), "request behind it")
		}
	}
	if n := sqlCount(t, env, `SELECT count(*) FROM audit_logs WHERE action = 'alloc.place_queued'`); n != len(queued) {
		t.Errorf("place_queued audit rows got %d; want %d", n, len(queued))
	}
}

// TestQueueHeadBlocksItsSKUOnly: a queued request that does not fit holds
// back the requests behind it for the same SKU (FIFO), but not another
// SKU's queue.
func TestQueueHeadBlocksItsSKUOnly(t *testing.T) {
	t.Parallel()
	nodes := append(h200SliceNodes(1), controldtest.SliceNode("h100", "H100"))
	env := controldtest.Start(t, controldtest.Options{Nodes: nodes})
	c := env.Client(env.AdminToken)
	ctx := context.Background()
	full := fillWithSingles(t, c, 8)
	h100Full, err := c.AllocCreate(ctx, api.AllocCreateRequest{SKU: "h100-slice", GPUs: 8})
	if err != nil {
		t.Fatal(err)
	}
	queue := func(sku string, gpus int) *api.Allocation {
		a, err := c.AllocCreate(ctx, api.AllocCreateRequest{SKU: sku, GPUs: gpus, Queue: true})
		if err != nil {
			t.Fatalf("queue %d × %s: %v", gpus, sku, err)
		}
		return a
	}
	head := queue("h200-slice", 2)
	behind := queue("h200-slice", 1)
	other := queue("h100-slice", 4)

	// One H200 slot frees: the 1-GPU request behind the 2-GPU head must
	// not jump the queue. PlaceQueued is what the queue loop runs; calling
	// it here makes "nothing happened" certain rather than timed.
	freeAllocSlots(t, env, full[0].ID)
	if n, err := alloc.PlaceQueued(ctx, env.Server.Pool(), env.Server.AllocRules(), time.Now); err != nil || n != 0 {
		t.Fatalf("PlaceQueued with one free slot got %d placed, %v; want 0 (head needs 2)", n, err)
	}
	checkQueued(t, getAlloc(t, c, head.ID), "2-GPU head")
	checkQueued(t, getAlloc(t, c, behind.ID), "1-GPU request behind the head")

	// H100 capacity frees: its queue moves although the H200 head waits.
	freeAllocSlots(t, env, h100Full.ID)
	testutil.EventuallyWithin(t, 10*time.Second, "the H100 request to be placed", func() bool { return getAlloc(t, c, other.ID).State == api.AllocProvisioning })
	checkQueued(t, getAlloc(t, c, head.ID), "2-GPU H200 head")

	// A second H200 slot: the head goes first, then nothing is left.
	freeAllocSlots(t, env, full[1].ID)
	testutil.EventuallyWithin(t, 10*time.Second, "the H200 head to be placed", func() bool { return getAlloc(t, c, head.ID).State == api.AllocProvisioning })
	checkQueued(t, getAlloc(t, c, behind.ID), "1-GPU request behind the head")
	freeAllocSlots(t, env, full[2].ID)
	testutil.EventuallyWithin(t, 10*time.Second, "the 1-GPU request to be placed", func() bool { return getAlloc(t, c, behind.ID).State == api.AllocProvisioning })
}

// TestQueueHeadHeldByAnotherTransaction: while another transaction holds
// the head of a line (a placer at work, or the head being released), a
// placer must not pass over it and place the request behind it.
func TestQueueHeadHeldByAnotherTransaction(t *testing.T) {
	t.Parallel()
	env := controldtest.Start(t, controldtest.Options{Nodes: h200SliceNodes(1)})
	c := env.Client(env.AdminToken)
	ctx := context.Background()
	full := fillWithSingles(t, c, 8)
	queue := func(gpus int) *api.Allocation {
		a, err := c.AllocCreate(ctx, api.AllocCreateRequest{SKU: "h200-slice", GPUs: gpus, Queue: true})
		if err != nil {
			t.Fatal(err)
		}
		return a
	}
	head, behind := queue(2), queue(1)

	tx, err := env.Server.Pool().Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx) //nolint:errcheck
	if _, err := tx.Exec(ctx, `SELECT 1 FROM allocations WHERE id = $1 FOR UPDATE`, head.ID); err != nil {
		t.Fatal(err)
	}
	freeAllocSlots(t, env, full[0].ID) // room for the 1-GPU request only
	type result struct {
		n   int
		err error
	}
	done := make(chan result, 1)
	go func() {
		n, err := alloc.PlaceQueued(ctx, env.Server.Pool(), env.Server.AllocRules(), time.Now)
		done <- result{n, err}
	}()
	// Give a placer that skips locked rows time to do the wrong thing; a
	// correct one waits for the head (or leaves the line to its owner).
	time.Sleep(300 * time.Millisecond)
	if err := tx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	if r := <-done; r.err != nil || r.n != 0 {
		t.Fatalf("PlaceQueued with the head held got %d placed, %v; want 0", r.n, r.err)
	}
	checkQueued(t, getAlloc(t, c, head.ID), "2-GPU head")
	checkQueued(t, getAlloc(t, c, behind.ID), "1-GPU request behind the head")
}

func TestReleaseQueuedAllocation(t *testing.T) {
	t.Parallel()
	env := controldtest.Start(t, controldtest.Options{Nodes: h200SliceNodes(1)})
	c := env.Client(env.AdminToken)
	ctx := context.Background()
	full := fillWithSingles(t, c, 8)
	q, err := c.AllocCreate(ctx, api.AllocCreateRequest{SKU: "h200-slice", GPUs: 1, Queue: true})
	if err != nil {
		t.Fatal(err)
	}
	rel, err := c.AllocRelease(ctx, api.AllocReleaseRequest{ID: q.ID})
	if err != nil {
		t.Fatal(err)
	}
	if rel.State != api.AllocReleased || rel.Queued || len(rel.Slots) != 0 {
		t.Errorf("release of a queued request got %s queued=%v with %d slots; want released, not queued, no slots", rel.State, rel.Queued, len(rel.Slots))
	}
	if n := sqlCount(t, env, `SELECT count(*) FROM allocation_transitions WHERE allocation_id = $1`, q.ID); n != 1 {
		t.Errorf("transitions got %d; want 1 (requested → released)", n)
	}
	if n := sqlCount(t, env, `SELECT count(*) FROM node_tasks WHERE allocation_id = $1`, q.ID); n != 0 {
		t.Errorf("tasks got %d; want 0 (nothing was on a node)", n)
	}
	// Capacity that frees later must not revive it.
	freeAllocSlots(t, env, full[0].ID)
	if _, err := alloc.PlaceQueued(ctx, env.Server.Pool(), env.Server.AllocRules(), time.Now); err != nil {
		t.Fatal(err)
	}
	if got := getAlloc(t, c, q.ID); got.State != api.AllocReleased || len(got.Slots) != 0 {
		t.Errorf("after capacity freed got %s with %d slots; want still released with none", got.State, len(got.Slots))
	}
	if _, err := c.AllocRelease(ctx, api.AllocReleaseRequest{ID: q.ID}); !errors.Is(err, api.ErrConflict) {
		t.Errorf("second release got %v; want conflict", err)
	}
}
