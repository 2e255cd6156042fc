package endpointtest

import (
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/gpuaas/gpuaas/controld/endpoint"
	"github.com/gpuaas/gpuaas/controld/mutate"
)

// Harness is a domain's endpoints served over one database: Defs, what
// the domain's Endpoints(Deps) returned, and Run, the mutate.Runner its
// mutations commit through (with Mutate), on the clock the Deps were
// given.
type Harness struct {
	Defs []endpoint.Def
	Run  *mutate.Runner
}

// Serve is a Harness of defs whose mutations run on pool at now's
// readings; pass the same now to the domain's Deps.
func Serve(pool *pgxpool.Pool, now func() time.Time, defs []endpoint.Def) Harness {
	return Harness{Defs: defs, Run: &mutate.Runner{Pool: pool, Now: now}}
}

// Find is the endpoint named name among h's; the test stops when there
// is none.
func (h Harness) Find(t testing.TB, name string) endpoint.Def {
	t.Helper()
	return Find(t, h.Defs, name)
}
