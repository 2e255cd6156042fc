package audit_test

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/gpuaas/gpuaas/controld/audit"
	"github.com/gpuaas/gpuaas/controld/store"
	"github.com/gpuaas/gpuaas/internal/testutil"
)

func TestMain(m *testing.M) { os.Exit(testutil.Main(m)) }

var pgTemplate = testutil.NewTemplate("audit", store.Migrate)

var at = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

func newPool(t *testing.T) *pgxpool.Pool {
	t.Helper()
	pool, err := store.Open(context.Background(), testutil.Postgres(t, pgTemplate), 4)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return pool
}

// row is an audit_logs row as read back.
type row struct {
	at                                  time.Time
	actor, action, targetType, targetID string
	project                             *string
	corr, key                           string
	detail                              map[string]any
}

func rows(t *testing.T, pool *pgxpool.Pool) []row {
	t.Helper()
	rs, err := pool.Query(context.Background(), `SELECT at, actor_id, action, target_type, target_id, project_id,
		correlation_id, idempotency_key, detail FROM audit_logs ORDER BY id`)
	if err != nil {
		t.Fatal(err)
	}
	out, err := pgx.CollectRows(rs, func(r pgx.CollectableRow) (row, error) {
		var w row
		var detail []byte
		err := r.Scan(&w.at, &w.actor, &w.action, &w.targetType, &w.targetID, &w.project, &w.corr, &w.key, &detail)
		if err == nil {
			err = json.Unmarshal(detail, &w.detail)
		}
		return w, err
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

var meta = audit.Meta{At: at, ActorID: "u-1", CorrelationID: "corr-1", IdempotencyKey: "key-1"}

// TestWriteInTheMutationsTransaction: the row carries who, what, on what
// and how to trace it; it exists only if the transaction it was written
// in commits.
func TestWriteInTheMutationsTransaction(t *testing.T) {
	pool := newPool(t)
	ctx := context.Background()
	entry := audit.Entry{Action: "alloc.create", TargetType: "allocation", TargetID: "a-1", ProjectID: "p-1",
		Detail: map[string]any{"gpus": 2}}
	rolledBack := errors.New("the mutation failed")
	err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		if err := audit.Write(ctx, tx, meta, entry); err != nil {
			return err
		}
		return rolledBack
	})
	if !errors.Is(err, rolledBack) {
		t.Fatal(err)
	}
	if got := rows(t, pool); len(got) != 0 {
		t.Fatalf("rows after the mutation rolled back: got %d; want 0", len(got))
	}
	if err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error { return audit.Write(ctx, tx, meta, entry) }); err != nil {
		t.Fatal(err)
	}
	got := rows(t, pool)
	if len(got) != 1 {
		t.Fatalf("rows: got %d; want 1", len(got))
	}
	r := got[0]
	if !r.at.Equal(at) || r.actor != "u-1" || r.action != "alloc.create" || r.targetType != "allocation" ||
		r.targetID != "a-1" || r.project == nil || *r.project != "p-1" || r.corr != "corr-1" || r.key != "key-1" ||
		r.detail["gpus"] != float64(2) {
		t.Errorf("row: got %+v; want the entry and meta written", r)
	}
}

// TestWriteWithoutProjectOrDetail: no project is NULL (not ""), no
// detail is {}.
func TestWriteWithoutProjectOrDetail(t *testing.T) {
	pool := newPool(t)
	if err := audit.Write(context.Background(), pool, audit.Meta{At: at, ActorID: "system"},
		audit.Entry{Action: "node.register", TargetType: "node", TargetID: "n-1"}); err != nil {
		t.Fatal(err)
	}
	got := rows(t, pool)
	if len(got) != 1 || got[0].project != nil || len(got[0].detail) != 0 || got[0].detail == nil {
		t.Errorf("row: got %+v; want project NULL and detail {}", got)
	}
}

// TestBadDetailWritesNothing: a detail that cannot be encoded is an
// error before anything is sent, by Write and by QueueWrite alike.
func TestBadDetailWritesNothing(t *testing.T) {
	pool := newPool(t)
	bad := audit.Entry{Action: "x.y", TargetType: "t", TargetID: "1", Detail: map[string]any{"f": func() {}}}
	if err := audit.Write(context.Background(), pool, meta, bad); err == nil {
		t.Error("Write with an unencodable detail: got nil; want an error")
	}
	b := &pgx.Batch{}
	if err := audit.QueueWrite(b, meta, bad); err == nil {
		t.Error("QueueWrite with an unencodable detail: got nil; want an error")
	}
	if b.Len() != 0 {
		t.Errorf("batch after a refused QueueWrite: got %d queued; want 0", b.Len())
	}
	if got := rows(t, pool); len(got) != 0 {
		t.Errorf("rows: got %d; want 0", len(got))
	}
}

// TestQueueWriteInABatch: a queued row is written with the batch, and a
// failed insert comes back named as Write names it.
func TestQueueWriteInABatch(t *testing.T) {
	pool := newPool(t)
	ctx := context.Background()
	b := &pgx.Batch{}
	for _, id := range []string{"a-1", "a-2"} {
		if err := audit.QueueWrite(b, meta, audit.Entry{Action: "alloc.release", TargetType: "allocation", TargetID: id}); err != nil {
			t.Fatal(err)
		}
	}
	if err := pool.SendBatch(ctx, b).Close(); err != nil {
		t.Fatal(err)
	}
	got := rows(t, pool)
	if len(got) != 2 || got[0].targetID != "a-1" || got[1].targetID != "a-2" {
		t.Fatalf("rows: got %+v; want a-1 then a-2", got)
	}
	// A NUL byte is refused by Postgres in text: the insert fails.
	b = &pgx.Batch{}
	if err := audit.QueueWrite(b, meta, audit.Entry{Action: "alloc.release", TargetType: "allocation", TargetID: "bad\x00"}); err != nil {
		t.Fatal(err)
	}
	err := pool.SendBatch(ctx, b).Close()
	if err == nil || !strings.HasPrefix(err.Error(), "write audit alloc.release: ") {
		t.Errorf("failed queued insert: got %v; want it named \"write audit alloc.release: …\"", err)
	}
}
