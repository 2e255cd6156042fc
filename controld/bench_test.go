package controld_test

// Benchmarks of the API and the scheduler, each next to a baseline
// measured in the same run so that the figures travel between machines as
// ratios. How to run them and the last figures: bench/README.md.

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/nats-io/nats.go"

	"github.com/gpuaas/gpuaas/controld/controldtest"
	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/testutil"
)

// benchClients are the concurrency levels of the create benchmarks.
var benchClients = []int{1, 16}

// allocGetSizes returns the sizes of an alloc.get request body and of its
// reply, as they travel, for an allocation holding slots.
func allocGetSizes(b *testing.B, env *controldtest.Env, id string) (req, reply int) {
	b.Helper()
	body, _ := json.Marshal(api.AllocRef{ID: id})
	msg := nats.NewMsg(api.Subject(api.EndpointAllocGet))
	msg.Data = body
	msg.Header.Set(api.HeaderAuthorization, "Bearer "+env.AdminToken)
	msg.Header.Set(api.HeaderProject, env.Project.Name)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	r, err := env.RequestMsg(ctx, msg)
	if err != nil {
		b.Fatal(err)
	}
	return len(body), len(r.Data)
}

func benchAllocation(b *testing.B) (*controldtest.Env, *api.Allocation) {
	b.Helper()
	env := controldtest.Start(b, controldtest.Options{Log: testutil.BenchLogger(b)})
	a, err := env.Client(env.AdminToken).AllocCreate(context.Background(), api.AllocCreateRequest{SKU: "h200-slice", GPUs: 2})
	if err != nil {
		b.Fatal(err)
	}
	return env, a
}

// BenchmarkAllocGet is one alloc.get through api.Client: NATS
// request-reply, token check against Postgres, two reads.
func BenchmarkAllocGet(b *testing.B) {
	env, a := benchAllocation(b)
	c := env.Client(env.AdminToken)
	req, reply := allocGetSizes(b, env, a.ID)
	ctx := context.Background()
	b.ReportAllocs()
	cpu := startCPU(b, env.Server.Pool())
	b.ResetTimer()
	for b.Loop() {
		if _, err := c.AllocGet(ctx, a.ID); err != nil {
			b.Fatal(err)
		}
	}
	cpu.report(b)
	b.ReportMetric(float64(req), "req-bytes")
	b.ReportMetric(float64(reply), "reply-bytes")
}

// BenchmarkAllocGetParallel is BenchmarkAllocGet from many goroutines at
// once: one endpoint's requests run concurrently on its lanes (apiLanes
// subscriptions), though micro serves each subscription's in turn.
func BenchmarkAllocGetParallel(b *testing.B) {
	env, a := benchAllocation(b)
	c := env.Client(env.AdminToken)
	ctx := context.Background()
	b.SetParallelism(4)
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, err := c.AllocGet(ctx, a.ID); err != nil {
				b.Error(err)
				return
			}
		}
	})
}

// BenchmarkAllocGetUserConn is BenchmarkAllocGet on the user's own
// connection, which the auth callout let in with allow-lists the server
// checks on every publish and subscription (BenchmarkAllocGet runs on
// controld's connection, which has none).
func BenchmarkAllocGetUserConn(b *testing.B) {
	env, a := benchAllocation(b)
	c := env.UserClient(b, env.Admin.ID, env.AdminToken)
	ctx := context.Background()
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		if _, err := c.AllocGet(ctx, a.ID); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkNATSEcho is the baseline of BenchmarkAllocGet: a raw
// request-reply on the same kind of embedded server and connection, with
// the same headers and the same request and reply sizes.
func BenchmarkNATSEcho(b *testing.B) {
	env, a := benchAllocation(b)
	reqSize, replySize := allocGetSizes(b, env, a.ID)
	reply := make([]byte, replySize)
	sub, err := env.NC.Subscribe("bench.echo", func(m *nats.Msg) { _ = m.Respond(reply) })
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = sub.Unsubscribe() })
	body := make([]byte, reqSize)
	ctx := context.Background()
	b.ReportAllocs()
	cpu := startCPU(b, nil)
	b.ResetTimer()
	for b.Loop() {
		msg := nats.NewMsg("bench.echo")
		msg.Data = body
		msg.Header.Set(api.HeaderAuthorization, "Bearer "+env.AdminToken)
		msg.Header.Set(api.HeaderProject, env.Project.Name)
		ctx, cancel := context.WithTimeout(ctx, api.DefaultTimeout)
		r, err := env.NC.RequestMsgWithContext(ctx, msg)
		cancel()
		if err != nil || len(r.Data) != replySize {
			b.Fatalf("echo: %v", err)
		}
	}
	cpu.report(b)
	b.ReportMetric(float64(reqSize), "req-bytes")
	b.ReportMetric(float64(replySize), "reply-bytes")
}

// runConcurrently runs op b.N times over `clients` goroutines, each with
// its own worker index.
func runConcurrently(b *testing.B, clients int, op func(worker int) error) {
	b.Helper()
	var next atomic.Int64
	var wg sync.WaitGroup
	errs := make([]error, clients)
	b.ResetTimer()
	for w := range clients {
		wg.Go(func() {
			for next.Add(1) <= int64(b.N) {
				if err := op(w); err != nil {
					errs[w] = err
					return
				}
			}
		})
	}
	wg.Wait()
	b.StopTimer()
	for _, err := range errs {
		if err != nil {
			b.Fatal(err)
		}
	}
}

// addSliceNodes inserts count ready H200 slice nodes with 8 free slots
// each (4 per NUMA node) straight into the tables, which is what makes a
// 10,000-node fleet take a second instead of minutes.
func addSliceNodes(b *testing.B, pool *pgxpool.Pool, prefix string, count int) {
	b.Helper()
	ctx := context.Background()
	if _, err := pool.Exec(ctx, `INSERT INTO nodes (id, name, shape, gpu_model, state, created_at, updated_at)
		SELECT 'n-' || $1 || g, $1 || g, 'gpu_slice', 'H200', 'ready', now(), now()
		FROM generate_series(1, $2::int) g`, prefix, count); err != nil {
		b.Fatalf("insert nodes: %v", err)
	}
	if _, err := pool.Exec(ctx, `INSERT INTO slots (id, node_id, idx, gpu_pci, numa_node, state)
		SELECT 'sl-' || $1 || g || '-' || i, 'n-' || $1 || g, i, format('0000:%s:00.0', to_hex(24 + 16 * i)), i / 4, 'free'
		FROM generate_series(1, $2::int) g, generate_series(0, 7) i`, prefix, count); err != nil {
		b.Fatalf("insert slots: %v", err)
	}
	if _, err := pool.Exec(ctx, `ANALYZE nodes; ANALYZE slots`); err != nil {
		b.Fatal(err)
	}
}

// BenchmarkAllocCreate is one 1-GPU alloc.create through api.Client, each
// client on its own NATS connection: idempotency record, placement,
// allocation, transition, task, audit and outbox rows in one
// transaction. The fleet is reset before every run and grown so that
// capacity never runs out.
func BenchmarkAllocCreate(b *testing.B) {
	// Every create must pass the funds check with all the earlier ones
	// burning: credit enough for any b.N.
	env := controldtest.Start(b, controldtest.Options{NoNodes: true, CreditMinor: 1 << 50})
	pool := env.Server.Pool()
	const baseNodes = 256
	addSliceNodes(b, pool, "bench-", baseNodes)
	nodes := baseNodes
	for _, clients := range benchClients {
		b.Run(fmt.Sprintf("clients=%d", clients), func(b *testing.B) {
			ctx := context.Background()
			if _, err := pool.Exec(ctx, `UPDATE slots SET state = 'free', allocation_id = NULL WHERE state = 'reserved'`); err != nil {
				b.Fatal(err)
			}
			if need := (b.N+7)/8 + 1; need > nodes {
				addSliceNodes(b, pool, fmt.Sprintf("grow%d-", nodes), need-nodes)
				nodes = need
			}
			cs := make([]*api.Client, clients)
			for i := range cs {
				// Each on the admin's own connection: the bus refuses one
				// without credentials.
				cs[i] = env.UserClient(b, env.Admin.ID, env.AdminToken)
			}
			b.ReportAllocs()
			runConcurrently(b, clients, func(w int) error {
				_, err := cs[w].AllocCreate(ctx, api.AllocCreateRequest{SKU: "h200-slice", GPUs: 1})
				return err
			})
			b.ReportMetric(float64(nodes), "nodes")
		})
	}
}

// BenchmarkPgxInsertUpdateTx is the baseline of BenchmarkAllocCreate: a
// bare pgx transaction with one INSERT and one UPDATE on a scratch table
// of the same database, at the same concurrency, through a pool of the
// same size as controld's.
func BenchmarkPgxInsertUpdateTx(b *testing.B) {
	env := controldtest.Start(b, controldtest.Options{NoNodes: true})
	ctx := context.Background()
	// As the database's owner (env.DSN): controld's role (store.AppRole)
	// may not create tables in schema public, so a pool copied from
	// controld's failed with "permission denied for schema public". Same
	// server, database, settings and pool size; only the role differs.
	cfg, err := pgxpool.ParseConfig(env.DSN)
	if err != nil {
		b.Fatal(err)
	}
	cfg.MaxConns = env.Server.Pool().Config().MaxConns
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(pool.Close)
	if _, err := pool.Exec(ctx, `CREATE TABLE bench_scratch (id bigserial PRIMARY KEY, payload text NOT NULL,
		state text NOT NULL, version bigint NOT NULL DEFAULT 1, updated_at timestamptz NOT NULL)`); err != nil {
		b.Fatal(err)
	}
	for _, clients := range benchClients {
		b.Run(fmt.Sprintf("clients=%d", clients), func(b *testing.B) {
			b.ReportAllocs()
			runConcurrently(b, clients, func(int) error {
				return pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
					var id int64
					if err := tx.QueryRow(ctx, `INSERT INTO bench_scratch (payload, state, updated_at)
						VALUES ($1, 'requested', now()) RETURNING id`, "a-benchmark01").Scan(&id); err != nil {
						return err
					}
					_, err := tx.Exec(ctx, `UPDATE bench_scratch SET state = 'provisioning', version = version + 1,
						updated_at = now() WHERE id = $1 AND version = 1`, id)
					return err
				})
			})
		})
	}
}

// percentile of sorted durations (nearest rank).
func percentile(sorted []time.Duration, q float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	return sorted[int(q*float64(len(sorted)-1)+0.5)]
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
