package hosts

import (
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/gpuaas/gpuaas/controld/alloc"
	"github.com/gpuaas/gpuaas/controld/faults"
	"github.com/gpuaas/gpuaas/controld/node"
	"github.com/gpuaas/gpuaas/controld/tasks"
)

// withDomains fills cfg's domains with the real ones controld.New passes
// (tests may import them; the package may not), and settlers of its own
// added to the domains'.
func withDomains(t *testing.T, pool *pgxpool.Pool, cfg Config, extra tasks.Settlers) Config {
	t.Helper()
	settlers, err := tasks.JoinSettlers(alloc.Settlers(faults.ProvisionVerdict), node.Settlers(false), extra)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Settlers = settlers
	cfg.Nodes = node.Reports{Pool: pool}
	cfg.Faults = faults.Applier{Pool: pool, Log: cfg.Log}
	cfg.ProgressEvents = alloc.ProgressEvents
	return cfg
}
