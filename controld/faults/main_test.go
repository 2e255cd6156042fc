package faults_test

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/gpuaas/gpuaas/controld/node"
	"github.com/gpuaas/gpuaas/controld/storetest"
	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/ids"
	"github.com/gpuaas/gpuaas/internal/testutil"
)

func TestMain(m *testing.M) { os.Exit(testutil.Main(m)) }

var pgTemplate = storetest.Template("faults")

// t0 is the tests' clock reading.
var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

// env is a node of four GPU slots, two of them reserved by an active
// allocation of a project with one member.
type env struct {
	pool   *pgxpool.Pool
	nodeID string
	user   string
	alloc  string
}

func gpu(i int) string { return fmt.Sprintf("0000:1%d:00.0", i) }

func newEnv(t *testing.T) *env {
	t.Helper()
	ctx := context.Background()
	pool := storetest.Open(t, pgTemplate, 4)
	e := &env{pool: pool, user: ids.New(ids.User)}
	project := ids.New(ids.Project)
	storetest.User(t, pool, e.user, "user@example.test", t0)
	storetest.OwnedProject(t, pool, project, "proj", e.user, t0)
	storetest.Catalog(t, pool)
	spec := node.Spec{Name: "gpu-1", Shape: api.ShapeGPUSlice, GPUModel: "H200"}
	for i := range 4 {
		spec.Slots = append(spec.Slots, node.SlotSpec{GPUPCI: gpu(i)})
	}
	n, err := node.Register(ctx, pool, spec, t0)
	if err != nil {
		t.Fatal(err)
	}
	e.nodeID = n.ID
	if _, err := node.ApproveSlots(ctx, pool, n.ID, nil); err != nil {
		t.Fatal(err)
	}
	e.alloc = storetest.Allocation(t, pool, api.Allocation{ProjectID: project, UserID: e.user, SKU: "h200-slice",
		Shape: api.ShapeGPUSlice, GPUs: 2, State: api.AllocActive, CreatedAt: t0}).ID
	// Fixture: the allocation holds GPUs 0 and 1.
	if _, err := pool.Exec(ctx, `UPDATE slots SET state = 'reserved', allocation_id = $2 WHERE node_id = $1 AND idx < 2`,
		n.ID, e.alloc); err != nil {
		t.Fatal(err)
	}
	return e
}

// rows counts what faults write: fault records, quarantined slots,
// audit rows and outbox events.
type rows struct{ faults, quarantined, audit, events int }

func (e *env) rows(t *testing.T) rows {
	t.Helper()
	var r rows
	if err := e.pool.QueryRow(context.Background(), `SELECT (SELECT count(*) FROM gpu_faults),
		(SELECT count(*) FROM slots WHERE quarantined_at IS NOT NULL),
		(SELECT count(*) FROM audit_logs), (SELECT count(*) FROM outbox_events)`).
		Scan(&r.faults, &r.quarantined, &r.audit, &r.events); err != nil {
		t.Fatal(err)
	}
	return r
}

func (e *env) inTx(fn func(tx pgx.Tx) error) error {
	return pgx.BeginFunc(context.Background(), e.pool, fn)
}
