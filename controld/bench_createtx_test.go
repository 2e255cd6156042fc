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
// tells the database's share of a create from the rest.
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
			runConcurrently(b, clients, func(int) error {
				_, err := runner.Run(ctx, mutate.Request{Endpoint: api.EndpointAllocCreate, ActorID: actor.UserID,
					Key: ids.New("bench"), Fingerprint: []byte("{}")},
					func(ctx context.Context, tx pgx.Tx) (any, mutate.Effect, error) {
						return alloc.Create(ctx, tx, actor, req, rules, time.Now().UTC())
					})
				return err
			})
			b.ReportMetric(float64(nodes), "nodes")
		})
	}
}
