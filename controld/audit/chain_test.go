package audit_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/gpuaas/gpuaas/controld/audit"
	"github.com/gpuaas/gpuaas/controld/store"
	"github.com/gpuaas/gpuaas/internal/api"
)

// writeRows writes n audit rows about project p ("" for none), each in a
// transaction of its own, as mutations do.
func writeRows(t *testing.T, pool *pgxpool.Pool, p string, n int) {
	t.Helper()
	for i := range n {
		err := store.InTx(context.Background(), pool, func(tx pgx.Tx) error {
			return audit.Write(context.Background(), tx, audit.Meta{At: at, ActorID: "u-1", CorrelationID: "c-1",
				IdempotencyKey: fmt.Sprintf("k-%s-%d", p, i)},
				audit.Entry{Action: "alloc.create", TargetType: "allocation", TargetID: fmt.Sprintf("a-%d", i), ProjectID: p,
					Detail: map[string]any{"gpus": i, "sku": "h200-slice", "note": "ü\"\\"}})
		})
		if err != nil {
			t.Error(err)
			return
		}
	}
}

func mustVerify(t *testing.T, pool *pgxpool.Pool) *api.AuditVerifyResponse {
	t.Helper()
	v, err := audit.Verify(context.Background(), pool)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// TestChainPerStreamUnderConcurrency: rows written at once by concurrent
// transactions, in two project streams and the platform's, form one chain
// per stream with no fork, and Verify's Go hashes match the database's.
func TestChainPerStreamUnderConcurrency(t *testing.T) {
	pool := newPool(t)
	var wg sync.WaitGroup
	for _, p := range []string{"p-a", "p-a", "p-b", "", ""} {
		wg.Go(func() { writeRows(t, pool, p, 8) })
	}
	wg.Wait()
	v := mustVerify(t, pool)
	if !v.OK || v.Streams != 3 || v.Rows != 40 {
		t.Fatalf("verify: got %+v; want ok, 3 streams, 40 rows", v)
	}
}

// TestAppendOnly: the application cannot change or remove audit rows.
func TestAppendOnly(t *testing.T) {
	pool := newPool(t)
	writeRows(t, pool, "p-a", 2)
	for _, sql := range []string{`UPDATE audit_logs SET action = 'x'`, `DELETE FROM audit_logs`, `TRUNCATE audit_logs`} {
		if _, err := pool.Exec(t.Context(), sql); err == nil || !strings.Contains(err.Error(), "append-only") {
			t.Errorf("%s: got %v; want refused (append-only)", sql, err)
		}
	}
}

// TestVerifyNamesTheTamperedRow breaks the trail the only way left, as a
// superuser with the triggers switched off, and expects Verify to name
// the row.
func TestVerifyNamesTheTamperedRow(t *testing.T) {
	tests := []struct {
		name   string
		tamper string // $1: the id of the second row of stream p-a
		want   string
	}{
		{"detail edited", `UPDATE audit_logs SET detail = detail || '{"gpus": 8}' WHERE id = $1`, "does not match its contents"},
		{"actor edited", `UPDATE audit_logs SET actor_id = 'u-mallory' WHERE id = $1`, "does not match its contents"},
		{"at edited", `UPDATE audit_logs SET at = at + interval '1 microsecond' WHERE id = $1`, "does not match its contents"},
		{"row deleted", `DELETE FROM audit_logs WHERE id = $1`, "a row is missing"},
		{"rehashed after an edit", `UPDATE audit_logs SET target_id = 'a-x', hash = audit_hash(prev_hash, seq, stream, at, actor_id,
			action, target_type, 'a-x', project_id, correlation_id, idempotency_key, detail) WHERE id = $1`, "is not the previous row's hash"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pool := newPool(t)
			writeRows(t, pool, "p-a", 4)
			writeRows(t, pool, "", 2)
			if v := mustVerify(t, pool); !v.OK {
				t.Fatalf("before tampering: %+v", v)
			}
			var id int64
			if err := pool.QueryRow(t.Context(), `SELECT id FROM audit_logs WHERE stream = 'p-a' AND seq = 2`).Scan(&id); err != nil {
				t.Fatal(err)
			}
			err := store.InTx(t.Context(), pool, func(tx pgx.Tx) error {
				if _, err := tx.Exec(t.Context(), `SET LOCAL session_replication_role = replica`); err != nil {
					return err
				}
				_, err := tx.Exec(t.Context(), tt.tamper, id)
				return err
			})
			if err != nil {
				t.Fatal(err)
			}
			v := mustVerify(t, pool)
			if v.OK || len(v.Problems) == 0 {
				t.Fatalf("verify after %s: got ok; want a problem", tt.name)
			}
			p := v.Problems[0]
			if !strings.Contains(p.Problem, tt.want) || !strings.Contains(p.Problem, "stream \"p-a\"") {
				t.Errorf("problem: got %q; want it to name stream p-a and say %q", p.Problem, tt.want)
			}
			if tt.name != "row deleted" && tt.name != "rehashed after an edit" && p.ID != id {
				t.Errorf("problem names row %d; want %d", p.ID, id)
			}
		})
	}
}
