package agent_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/gpuaas/gpuaas/controld"
	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/testutil"
)

// TestControldDowntimeIsNotNodeSilence: after controld was down for longer
// than DownAfter, a node that still heartbeats is never marked down (its
// last recorded heartbeat is old only because nobody was listening), and a
// node that really is silent is marked down, but only once controld has
// listened for DownAfter.
func TestControldDowntimeIsNotNodeSilence(t *testing.T) {
	t.Parallel()
	const downAfter = 2 * time.Second
	env, admin := fleet(t, controld.HostsConfig{HeartbeatInterval: 200 * time.Millisecond, DownAfter: downAfter})
	live := startAgent(t, env, t.TempDir(), enroll(t, admin, "node-live"), newFakeHost().registry())
	silent := startAgent(t, env, t.TempDir(), enroll(t, admin, "node-silent"), newFakeHost().registry())
	readyNode(t, admin, live.NodeID())
	readyNode(t, admin, silent.NodeID())
	silent.stop()

	ctx := context.Background()
	var liveUpdated time.Time
	var restarted time.Time
	env.Restart(t, func() {
		// controld was down for an hour: every recorded heartbeat is old.
		conn, err := pgx.Connect(ctx, env.DSN)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close(ctx)
		if _, err := conn.Exec(ctx, `UPDATE nodes SET last_heartbeat_at = last_heartbeat_at - interval '1 hour'
			WHERE id = ANY($1)`, []string{live.NodeID(), silent.NodeID()}); err != nil {
			t.Fatal(err)
		}
		if err := conn.QueryRow(ctx, `SELECT updated_at FROM nodes WHERE id = $1`, live.NodeID()).Scan(&liveUpdated); err != nil {
			t.Fatal(err)
		}
		restarted = time.Now()
	})
	admin = env.Client(env.AdminToken)

	testutil.Eventually(t, "the silent node to go down", func() bool {
		d, err := admin.NodeGet(ctx, silent.NodeID())
		return err == nil && d.Node.State == api.NodeDown
	})
	var silentDown, liveNow time.Time
	var liveState string
	pool := env.Server.Pool()
	if err := pool.QueryRow(ctx, `SELECT updated_at FROM nodes WHERE id = $1`, silent.NodeID()).Scan(&silentDown); err != nil {
		t.Fatal(err)
	}
	if got := silentDown.Sub(restarted); got < downAfter {
		t.Errorf("silent node marked down %v after the restart; want at least DownAfter (%v) of grace", got, downAfter)
	}
	// Marking a node down stamps updated_at; a heartbeat that brings it
	// back does not, so a transient down would still show here.
	if err := pool.QueryRow(ctx, `SELECT state, updated_at FROM nodes WHERE id = $1`, live.NodeID()).Scan(&liveState, &liveNow); err != nil {
		t.Fatal(err)
	}
	if liveState != api.NodeReady || !liveNow.Equal(liveUpdated) {
		t.Errorf("heartbeating node: state %s, updated_at %v; want ready and unchanged (%v): it was marked down",
			liveState, liveNow, liveUpdated)
	}
}
