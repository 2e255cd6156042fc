package storetest

import (
	"context"
	"testing"
	"time"

	"github.com/gpuaas/gpuaas/controld/catalog"
	"github.com/gpuaas/gpuaas/controld/store"
	"github.com/gpuaas/gpuaas/internal/api"
)

// Users inserts each of ids as User does, with the email
// <id>@example.test.
func Users(t testing.TB, q store.Querier, at time.Time, ids ...string) {
	t.Helper()
	for _, id := range ids {
		User(t, q, id, id+"@example.test", at)
	}
}

// OwnedProject inserts a project created by owner at at, with owner as
// its member of role owner.
func OwnedProject(t testing.TB, q store.Querier, id, name, owner string, at time.Time) {
	t.Helper()
	Project(t, q, id, name, owner, at)
	Member(t, q, id, owner, api.ProjectOwner, at)
}

// Catalog seeds the default catalog (catalog.Defaults: the SKUs
// allocations name, such as h100-baremetal and h200-slice).
func Catalog(t testing.TB, q store.Querier) {
	t.Helper()
	if err := catalog.Seed(context.Background(), q, catalog.Defaults); err != nil {
		t.Fatalf("fixture catalog: %v", err)
	}
}

// Node inserts a ready node of shape and GPU model, created and updated
// now, without slots (node.Register is the way to a node with slots).
func Node(t testing.TB, q store.Querier, id, name, shape, gpuModel string) {
	t.Helper()
	exec(t, q, "node", `INSERT INTO nodes (id, name, shape, gpu_model, state, created_at, updated_at)
		VALUES ($1, $2, $3, $4, 'ready', now(), now())`, id, name, shape, gpuModel)
}

// OnNode places allocation allocID on node nodeID (its node_id), as
// placement would, without slots.
func OnNode(t testing.TB, q store.Querier, allocID, nodeID string) {
	t.Helper()
	exec(t, q, "allocation's node", `UPDATE allocations SET node_id = $2 WHERE id = $1`, allocID, nodeID)
}
