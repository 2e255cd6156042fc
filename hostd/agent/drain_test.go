package agent_test

import (
	"context"
	"testing"
	"time"

	"github.com/gpuaas/gpuaas/controld"
	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/hostproto"
	"github.com/gpuaas/gpuaas/internal/testutil"
)

// TestSIGTERMDuringTaskReportsItsResult: hostd is stopped (SIGTERM, its
// context ends) while a provisioning task runs. It takes no new task, lets
// the running one finish and reports its result before it exits: the
// allocation is active the moment Run returned, with nothing left for a
// restart. Before the drain the task's context was Run's: the task was cut
// off and left to be reported interrupted at the next start.
func TestSIGTERMDuringTaskReportsItsResult(t *testing.T) {
	t.Parallel()
	env, admin := fleet(t, controld.HostsConfig{})
	host := newFakeHost()
	host.block = make(chan struct{})
	a := startAgent(t, env, t.TempDir(), enroll(t, admin, "node-drain"), host.registry())
	readyNode(t, admin, a.NodeID())
	ctx := context.Background()
	al, err := admin.AllocCreate(ctx, api.AllocCreateRequest{SKU: "h200-slice", GPUs: 2})
	if err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, "provisioning to reach define_start", func() bool {
		got, err := admin.AllocGet(ctx, al.ID)
		if err != nil {
			return false
		}
		for _, p := range got.Timeline {
			if p.Phase == "define_start" && p.Status == api.PhaseStarted {
				return true
			}
		}
		return false
	})
	stopped := make(chan struct{})
	go func() { a.stop(); close(stopped) }()
	select {
	case <-a.Draining():
	case <-time.After(20 * time.Second):
		t.Fatal("agent did not start draining")
	}
	// The task goes on after SIGTERM; it finishes now.
	close(host.block)
	select {
	case <-stopped:
	case <-time.After(30 * time.Second):
		t.Fatal("agent did not stop after its task finished")
	}
	got, err := admin.AllocGet(ctx, al.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.State != api.AllocActive {
		t.Fatalf("allocation right after hostd stopped: got %s (%s); want active", got.State, got.Reason)
	}
	var state string
	if err := env.Server.Pool().QueryRow(ctx, `SELECT state FROM node_tasks WHERE allocation_id = $1 AND type = $2`,
		al.ID, api.TaskVMProvision).Scan(&state); err != nil {
		t.Fatal(err)
	}
	if state != hostproto.TaskSucceeded {
		t.Fatalf("provisioning task: got %s; want %s", state, hostproto.TaskSucceeded)
	}
	if n := host.count(api.TaskVMProvision); n != 1 {
		t.Fatalf("provisioning ran %d times; want 1", n)
	}
}
