package agent_test

import (
	"context"
	"testing"
	"time"

	"github.com/gpuaas/gpuaas/controld"
	"github.com/gpuaas/gpuaas/controld/controldtest"
	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/testutil"
)

// TestReplicaCutFromPostgresDoesNotTakeNodesDown: a controld replica
// silently cut off from Postgres while it still receives heartbeats (it
// cannot record them) does not get the healthy nodes marked down by the
// other replica; and liveness still works: a node that really stops is
// marked down. Before, the healthy replica's liveness loop saw the
// heartbeats the cut one swallowed as silence and marked both nodes down
// (the fault suite's partition run: after ~25 s).
func TestReplicaCutFromPostgresDoesNotTakeNodesDown(t *testing.T) {
	t.Parallel()
	const beat, downAfter = 100 * time.Millisecond, 300 * time.Millisecond
	env := controldtest.Start(t, controldtest.Options{NoNodes: true,
		Hosts: controld.HostsConfig{HeartbeatInterval: beat, DownAfter: downAfter, AutoApproveSlots: true}})
	admin := env.Client(env.AdminToken)
	nodes := []*runningAgent{
		startAgent(t, env, t.TempDir(), enroll(t, admin, "node-p1"), newFakeHost().registry()),
		startAgent(t, env, t.TempDir(), enroll(t, admin, "node-p2"), newFakeHost().registry()),
	}
	for _, a := range nodes {
		readyNode(t, admin, a.NodeID())
	}
	via, proxy := testutil.PostgresVia(t, env.DSN)
	cut := env.StartReplicaVia(t, via, env.NATSURL, nil)
	// The replica receives node reports: heartbeats reach its connection.
	before := cut.NC.Stats().InMsgs
	testutil.Eventually(t, "the second replica to receive heartbeats", func() bool {
		return cut.NC.Stats().InMsgs >= before+20
	})

	ctx := context.Background()
	pool := env.Server.Pool()
	downNodes := func() []string {
		rows, err := pool.Query(ctx, `SELECT name FROM nodes WHERE state = 'down'`)
		if err != nil {
			t.Fatal(err)
		}
		defer rows.Close()
		var names []string
		for rows.Next() {
			var n string
			if err := rows.Scan(&n); err != nil {
				t.Fatal(err)
			}
			names = append(names, n)
		}
		return names
	}
	proxy.SetCut(true)
	start := time.Now()
	// 10 s of the cut is ~100 heartbeats per node, about half of them to
	// the cut replica: runs of three in a row are all but certain.
	for time.Since(start) < 10*time.Second {
		if down := downNodes(); len(down) > 0 {
			t.Fatalf("nodes %v marked down %v into the cut of the other replica; want none (they heartbeat)",
				down, time.Since(start).Round(time.Millisecond))
		}
		time.Sleep(50 * time.Millisecond) // a sampling period, not a wait for readiness
	}
	proxy.SetCut(false)

	// Liveness still marks a node that stops down.
	nodes[1].stop()
	stopped := time.Now()
	testutil.EventuallyWithin(t, time.Minute, "the stopped node to be marked down", func() bool {
		d, err := admin.NodeGet(ctx, nodes[1].NodeID())
		return err == nil && d.Node.State == api.NodeDown
	})
	t.Logf("stopped node marked down %v after it stopped (DownAfter %v)", time.Since(stopped).Round(time.Millisecond), downAfter)
	if d, err := admin.NodeGet(ctx, nodes[0].NodeID()); err != nil || d.Node.State != api.NodeReady {
		t.Fatalf("heartbeating node after the cut: %+v, %v; want ready", d.Node, err)
	}
}
