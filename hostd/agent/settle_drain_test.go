package agent_test

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/gpuaas/gpuaas/controld"
	"github.com/gpuaas/gpuaas/controld/controldtest"
	"github.com/gpuaas/gpuaas/controld/outbox"
	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/hostproto"
	"github.com/gpuaas/gpuaas/internal/testutil"
)

// TestSIGTERMWhileSettlingAppliesTheResult is the regression test of
// `settle … context canceled`: a node result controld is applying when
// SIGTERM comes is applied. The test holds the allocation's row so that
// the provisioning result's settle waits on it, stops controld, and lets
// the row go once the stop has begun. Before the drain the settle ran
// under controld's run context: SIGTERM cancelled it ("node request
// failed … context canceled") and the allocation stayed provisioning.
func TestSIGTERMWhileSettlingAppliesTheResult(t *testing.T) {
	t.Parallel()
	logs := &syncBuffer{}
	env := controldtest.Start(t, controldtest.Options{NoNodes: true,
		Log:   slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
		Hosts: controld.HostsConfig{HeartbeatInterval: 200 * time.Millisecond, AutoApproveSlots: true}})
	defer func() {
		if t.Failed() {
			t.Logf("controld's log:\n%s", logs.String())
		}
	}()
	ctx := context.Background()
	admin := env.UserClient(t, env.Admin.ID, env.AdminToken)
	host := newFakeHost()
	host.block = make(chan struct{})
	a := startAgent(t, env, t.TempDir(), enroll(t, admin, "node-settle"), host.registry())
	readyNode(t, admin, a.NodeID())
	al, err := admin.AllocCreate(ctx, api.AllocCreateRequest{SKU: "h200-slice", GPUs: 1})
	if err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, "provisioning to run", func() bool { return host.count(api.TaskVMProvision) == 1 })

	db, err := pgx.Connect(ctx, env.DSN)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close(ctx)
	tx, err := db.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	if _, err := tx.Exec(ctx, `SELECT 1 FROM allocations WHERE id = $1 FOR UPDATE`, al.ID); err != nil {
		t.Fatal(err)
	}
	close(host.block) // the task succeeds; its result's settle waits on the row
	testutil.Eventually(t, "the result's settle to wait on the allocation", func() bool {
		var waiting int
		err := db.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock'
			AND datname = current_database()`).Scan(&waiting)
		return err == nil && waiting >= 1
	})
	stopped := make(chan error, 1)
	go func() { stopped <- env.Stop() }()
	testutil.Eventually(t, "controld to begin stopping (the relay lock let go)", func() bool {
		holder, err := outbox.RelayHolder(ctx, db)
		return err == nil && holder == 0
	})
	if err := tx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-stopped:
		if err != nil {
			t.Errorf("controld run: %v", err)
		}
	case <-time.After(time.Minute):
		t.Fatal("controld did not stop")
	}
	var task, state string
	if err := db.QueryRow(ctx, `SELECT t.state, a.state FROM node_tasks t JOIN allocations a ON a.id = t.allocation_id
		WHERE t.allocation_id = $1 AND t.type = $2`, al.ID, api.TaskVMProvision).Scan(&task, &state); err != nil {
		t.Fatal(err)
	}
	if task != hostproto.TaskSucceeded || state != api.AllocActive {
		t.Errorf("after the stop: task %s, allocation %s; want %s, %s", task, state, hostproto.TaskSucceeded, api.AllocActive)
	}
	for _, line := range strings.Split(logs.String(), "\n") {
		if strings.Contains(line, "context canceled") {
			t.Errorf("controld logged: %s", line)
		}
	}
}
