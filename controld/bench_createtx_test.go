package controld_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/gpuaas/gpuaas/controld/alloc"
	"github.com/gpuaas/gpuaas/controld/controldtest"
	"github.com/gpuaas/gpuaas/controld/mutate"
	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/ids"
)

// BenchmarkAllocCreateTx is BenchmarkAllocCreate's transaction alone:
// mutate.Runner running alloc.Create on controld's pool, without NATS,
// the client or the endpoint's checks. Next to BenchmarkAllocCreate it
// tells the database's share of a create from the rest. It also reports
// how many sessions wait for the project's funds and audit locks
// (sampleLockWaits).
func BenchmarkAllocCreateTx(b *testing.B) {
	env := controldtest.Start(b, controldtest.Options{NoNodes: true, CreditMinor: 1 << 50})
	pool := env.Server.Pool()
	const baseNodes = 256
	addSliceNodes(b, pool, "benchtx-", baseNodes)
	nodes := baseNodes
	runner := &mutate.Runner{Pool: pool, Now: time.Now}
	actor := alloc.Actor{UserID: env.Admin.ID, Role: env.Admin.Role}
	rules := env.Server.AllocRules()
	for _, clients := range benchClients {
		b.Run(fmt.Sprintf("clients=%d", clients), func(b *testing.B) {
			ctx := context.Background()
			if _, err := pool.Exec(ctx, `UPDATE slots SET state = 'free', allocation_id = NULL WHERE state = 'reserved'`); err != nil {
				b.Fatal(err)
			}
			if need := (b.N+7)/8 + 1; need > nodes {
				addSliceNodes(b, pool, fmt.Sprintf("growtx%d-", nodes), need-nodes)
				nodes = need
			}
			req := api.AllocCreateRequest{Project: env.Project.ID, SKU: "h200-slice", GPUs: 1}
			b.ReportAllocs()
			waits := sampleLockWaits(b, env.DSN, env.Project.ID)
			runConcurrently(b, clients, func(int) error {
				_, err := runner.Run(ctx, mutate.Request{Endpoint: api.EndpointAllocCreate, ActorID: actor.UserID,
					Key: ids.New("bench"), Fingerprint: []byte("{}")},
					func(ctx context.Context, tx pgx.Tx) (any, mutate.Effect, error) {
						return alloc.Create(ctx, tx, actor, req, rules, time.Now().UTC())
					})
				return err
			})
			waits(b)
			b.ReportMetric(float64(nodes), "nodes")
		})
	}
}

// sampleLockWaits samples pg_stat_activity and pg_locks every
// millisecond, on a connection of its own, until the returned function
// is called; that reports, per sample, the mean number of sessions in a
// transaction ("in-tx") and of those waiting for the project's funds lock
// ("funds-waiters") or its audit stream's lock ("audit-waiters",
// migration 0023): where a create's time goes under contention, as a
// share that moves less with the machine's load than the wall clock
// (docs/decisions/0042-funds-lock-last.md).
func sampleLockWaits(b *testing.B, dsn, projectID string) func(*testing.B) {
	b.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		b.Fatal(err)
	}
	var samples, inTx, funds, audit int64
	done := make(chan error, 1)
	go func() {
		tick := time.NewTicker(time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				done <- nil
				return
			case <-tick.C:
			}
			var t, f, a int64
			err := conn.QueryRow(ctx, `SELECT
				(SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()
					AND xact_start IS NOT NULL),
				count(*) FILTER (WHERE ((l.classid::bigint << 32) | l.objid::bigint) = hashtextextended('alloc.funds:' || $1, 0)),
				count(*) FILTER (WHERE ((l.classid::bigint << 32) | l.objid::bigint) = hashtextextended('audit_logs:' || $1, 0))
				FROM pg_locks l WHERE l.locktype = 'advisory' AND NOT l.granted`, projectID).Scan(&t, &f, &a)
			if err != nil {
				if ctx.Err() == nil {
					done <- err
				} else {
					done <- nil
				}
				return
			}
			samples++
			inTx, funds, audit = inTx+t, funds+f, audit+a
		}
	}()
	return func(b *testing.B) {
		cancel()
		err := <-done
		_ = conn.Close(context.Background())
		if err != nil {
			b.Fatal(err)
		}
		if samples > 0 {
			n := float64(samples)
			b.ReportMetric(float64(inTx)/n, "in-tx")
			b.ReportMetric(float64(funds)/n, "funds-waiters")
			b.ReportMetric(float64(audit)/n, "audit-waiters")
		}
	}
}
