// Package storetest is the shared fixture of the tests of controld's
// domain packages: a migrated database of the test's own (Template,
// Open), the rows they need inserted straight into it — users, projects,
// members, the catalog, nodes, allocations — and the reads and
// transactions their checks make (Count, InTx). Each package keeps only
// the seeding that is its own. It is for the packages below controld
// that cannot use controldtest (which imports them); it is never linked
// into the daemon, and the ownership test does not count its writes.
package storetest

import (
	"context"
	"testing"
	"time"

	"github.com/gpuaas/gpuaas/controld/store"
	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/ids"
)

// exec runs one fixture statement, failing the test on error.
func exec(t testing.TB, q store.Querier, what, sql string, args ...any) {
	t.Helper()
	if _, err := q.Exec(context.Background(), sql, args...); err != nil {
		t.Fatalf("fixture %s: %v", what, err)
	}
}

// User inserts a local user of role user who cannot log in (the password
// hash is not one), created at.
func User(t testing.TB, q store.Querier, id, email string, at time.Time) {
	t.Helper()
	exec(t, q, "user", `INSERT INTO users (id, email, role, provider, password_hash, created_at)
		VALUES ($1, $2, 'user', 'local', 'x', $3)`, id, email, at)
}

// Project inserts a project created by createdBy at at, with no members.
func Project(t testing.TB, q store.Querier, id, name, createdBy string, at time.Time) {
	t.Helper()
	exec(t, q, "project", `INSERT INTO projects (id, name, created_by, created_at) VALUES ($1, $2, $3, $4)`,
		id, name, createdBy, at)
}

// Member adds userID to a project with role, at at.
func Member(t testing.TB, q store.Querier, projectID, userID, role string, at time.Time) {
	t.Helper()
	exec(t, q, "project member", `INSERT INTO project_members (project_id, user_id, role, added_at) VALUES ($1, $2, $3, $4)`,
		projectID, userID, role, at)
}

// Allocation inserts a as it is, without slots, meter or tasks, and
// returns it. Zero fields default: a new id, state requested, version 1,
// created now (UTC, to the microsecond Postgres keeps), updated when
// created.
func Allocation(t testing.TB, q store.Querier, a api.Allocation) api.Allocation {
	t.Helper()
	if a.ID == "" {
		a.ID = ids.New(ids.Allocation)
	}
	if a.State == "" {
		a.State = api.AllocRequested
	}
	if a.Version == 0 {
		a.Version = 1
	}
	if a.CreatedAt.IsZero() {
		a.CreatedAt = time.Now().UTC().Truncate(time.Microsecond)
	}
	if a.UpdatedAt.IsZero() {
		a.UpdatedAt = a.CreatedAt
	}
	exec(t, q, "allocation", `INSERT INTO allocations
		(id, project_id, user_id, sku_id, shape, gpus, state, version, queued, created_at, updated_at)
		VALUES ($1,$2,$3,$4,$5,$6,$7,$8,$9,$10,$11)`,
		a.ID, a.ProjectID, a.UserID, a.SKU, a.Shape, a.GPUs, a.State, a.Version, a.Queued, a.CreatedAt, a.UpdatedAt)
	return a
}
