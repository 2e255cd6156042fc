package agent_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/gpuaas/gpuaas/controld"
	"github.com/gpuaas/gpuaas/controld/controldtest"
	"github.com/gpuaas/gpuaas/hostd/agent"
	"github.com/gpuaas/gpuaas/hostd/sim"
	"github.com/gpuaas/gpuaas/hostd/tasks"
	"github.com/gpuaas/gpuaas/hostd/volume"
	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/testutil"
)

// TestGatewayDeathEndsVolumeSession: a volume session hold whose gateway
// died (gate.volume_end never comes) ends when the node's health report
// says it no longer has the volume mounted for a session, audited as
// volume.session_end by the node with the reason — not at the lease's
// end 12 h later. While the node holds the mount, and while the hold is
// younger than the grace, it stays. A real controld and a hostd agent on
// a sim host with real ext4 volumes (root).
func TestGatewayDeathEndsVolumeSession(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("volumes are loop-mounted ext4 images: root only")
	}
	t.Parallel()
	env, admin := fleet(t, controld.HostsConfig{})
	env.Credit(t, controldtest.ProjectName, 10_000_000)
	ctx := context.Background()
	pool := env.Server.Pool()
	h, err := sim.NewHost(filepath.Join(t.TempDir(), "state"), sim.H100Baremetal8(), "sim-volsess")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = h.Close() })
	tok, err := admin.NodeEnroll(ctx, api.EnrollTokenRequest{Name: "sim-volsess", Shape: api.ShapeBaremetal, Test: true})
	if err != nil {
		t.Fatal(err)
	}
	hostEnv := h.Env("", testutil.Logger(t))
	if hostEnv.Volumes == nil {
		t.Fatal("the sim host keeps no volumes")
	}
	tune := func(c *agent.Config) { c.Env, c.Handlers, c.Hostname = hostEnv, tasks.Default(), "sim-volsess" }
	a := startAgent(t, env, h.StateDir, tok.Token, nil, tune)
	nodeID := a.NodeID()
	testutil.Eventually(t, "node ready", func() bool {
		d, err := admin.NodeGet(ctx, nodeID)
		return err == nil && d.Node.State == api.NodeReady
	})
	v, err := admin.VolumeCreate(ctx, api.VolumeCreateRequest{Project: controldtest.ProjectName, Name: "data", Size: "1G", Node: nodeID})
	if err != nil {
		t.Fatal(err)
	}
	get := func() api.Volume {
		t.Helper()
		got, err := admin.VolumeGet(ctx, api.VolumeRef{Project: controldtest.ProjectName, Volume: "data"})
		if err != nil {
			t.Fatal(err)
		}
		return *got
	}
	testutil.Eventually(t, "volume ready", func() bool { return get().State == api.VolumeReady })

	// hold stands for gate.authorize's hold (controld/volumes.OpenSession)
	// of a session opened at `since`.
	hold := func(since time.Time) {
		t.Helper()
		if _, err := pool.Exec(ctx, `UPDATE volumes SET state = 'attached', session_key = 'SHA256:gateway-died',
			session_by = $2, session_at = $3 WHERE id = $1`, v.ID, env.Admin.ID, since); err != nil {
			t.Fatal(err)
		}
	}
	// report restarts the agent (its first heartbeat carries a fresh
	// health probe) and waits until controld has the probe's sessions.
	report := func(want int) {
		t.Helper()
		a.stop()
		if _, err := pool.Exec(ctx, `UPDATE nodes SET health = health #- '{probe,volume_sessions}' WHERE id = $1`, nodeID); err != nil {
			t.Fatal(err)
		}
		a = startAgent(t, env, h.StateDir, "", nil, tune)
		testutil.Eventually(t, "a health report listing the node's sessions", func() bool {
			var n *int
			err := pool.QueryRow(ctx, `SELECT jsonb_array_length(health->'probe'->'volume_sessions') FROM nodes WHERE id = $1`, nodeID).Scan(&n)
			return err == nil && n != nil && *n == want
		})
		var at time.Time
		if err := pool.QueryRow(ctx, `SELECT last_heartbeat_at FROM nodes WHERE id = $1`, nodeID).Scan(&at); err != nil {
			t.Fatal(err)
		}
		testutil.Eventually(t, "the next heartbeat", func() bool { // the report's check is done by then
			var next time.Time
			return pool.QueryRow(ctx, `SELECT last_heartbeat_at FROM nodes WHERE id = $1`, nodeID).Scan(&next) == nil && next.After(at)
		})
	}
	ended := func() int {
		t.Helper()
		var n int
		if err := pool.QueryRow(ctx, `SELECT count(*) FROM audit_logs WHERE action = 'volume.session_end' AND target_id = $1
			AND actor_id = $2 AND detail->>'reason' = $3`, v.ID, "node:"+nodeID, "node_reported_no_session").Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}

	// The node holds the session's mount: the hold stays, however old.
	dir := volume.SessionDir(h.StateDir, v.ID)
	if err := os.MkdirAll(filepath.Dir(dir), 0o700); err != nil {
		t.Fatal(err)
	}
	if _, err := hostEnv.Volumes.Mount(ctx, v.ID, dir, 4242, 4242); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = hostEnv.Volumes.Unmount(context.Background(), v.ID) })
	hold(time.Now().Add(-time.Hour))
	report(1)
	if got := get(); got.State != api.VolumeAttached || got.Session == nil {
		t.Fatalf("volume whose session the node holds: %+v; want still attached to the session", got)
	}

	// The gateway died: the node unmounted at once. A hold younger than
	// the grace stays (the node may not have mounted it yet) ...
	if err := hostEnv.Volumes.Unmount(ctx, v.ID); err != nil {
		t.Fatal(err)
	}
	hold(time.Now())
	report(0)
	if got := get(); got.State != api.VolumeAttached || ended() != 0 {
		t.Fatalf("a hold made moments ago: %+v (%d ends audited); want still attached", got, ended())
	}

	// ... an older one ends with the report, audited with the reason.
	hold(time.Now().Add(-10 * time.Minute))
	report(0)
	testutil.Eventually(t, "the lost session's hold to end", func() bool {
		got := get()
		return got.State == api.VolumeReady && got.Session == nil
	})
	if n := ended(); n != 1 {
		t.Fatalf("%d volume.session_end audit rows by the node with the reason; want 1", n)
	}
}
