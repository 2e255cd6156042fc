//go:build faultinject

package agent_test

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gpuaas/gpuaas/controld"
	"github.com/gpuaas/gpuaas/controld/controldtest"
	"github.com/gpuaas/gpuaas/controld/tasks"
	"github.com/gpuaas/gpuaas/hostd/agent"
	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/hostproto"
	"github.com/gpuaas/gpuaas/internal/testutil"
)

// TestTaskPathCrashes is the crash table of docs/decisions/0043-task-path.md:
// hostd (a child process) is killed with SIGKILL at each point of the
// task path, for a read-only type (the health probe, kept in memory) and
// a type that changes the host (vm_release, written durably before it
// runs); a new hostd then starts on the same state directory. Each task
// is settled exactly once (one task.settle audit row) with the outcome
// the table gives, and its handler ran the number of times it gives.
func TestTaskPathCrashes(t *testing.T) {
	env, admin := fleet(t, controld.HostsConfig{})
	cases := []struct {
		typ, step string
		state     string
		runs      int
	}{
		{api.TaskHealthProbe, agent.CrashAfterAccept, hostproto.TaskSucceeded, 1},
		{api.TaskHealthProbe, agent.CrashAfterRecord, hostproto.TaskSucceeded, 1},
		{api.TaskHealthProbe, agent.CrashAfterResult, hostproto.TaskSucceeded, 2},
		{api.TaskHealthProbe, agent.CrashAfterReport, hostproto.TaskSucceeded, 1},
		{api.TaskVMRelease, agent.CrashAfterAccept, hostproto.TaskSucceeded, 1},
		{api.TaskVMRelease, agent.CrashAfterRecord, hostproto.TaskInterrupted, 0},
		{api.TaskVMRelease, agent.CrashAfterResult, hostproto.TaskSucceeded, 1},
		{api.TaskVMRelease, agent.CrashAfterReport, hostproto.TaskSucceeded, 1},
	}
	for _, tc := range cases {
		t.Run(tc.typ+"/"+tc.step, func(t *testing.T) {
			ctx := context.Background()
			pool := env.Server.Pool()
			dir := t.TempDir()
			first := startAgent(t, env, dir, enroll(t, admin, "crash-"+tc.step[6:]+"-"+tc.typ[len(tc.typ)-5:]), countingRegistry(dir))
			nodeID := first.NodeID()
			readyNode(t, admin, nodeID)
			tag := "crash-" + tc.step
			var allocID string
			if tc.typ == api.TaskVMRelease {
				al, err := admin.AllocCreate(ctx, api.AllocCreateRequest{SKU: "h200-slice", GPUs: 1})
				if err != nil {
					t.Fatal(err)
				}
				allocID = waitAlloc(t, admin, al.ID, api.AllocActive).ID
			}
			first.stop()

			child := startChild(t, env, dir, tc.step)
			var taskID string
			if tc.typ == api.TaskVMRelease {
				if _, err := admin.AllocRelease(ctx, api.AllocReleaseRequest{ID: allocID}); err != nil {
					t.Fatal(err)
				}
				tag = ""
				if err := pool.QueryRow(ctx, `SELECT id FROM node_tasks WHERE allocation_id = $1 AND type = $2`,
					allocID, api.TaskVMRelease).Scan(&taskID); err != nil {
					t.Fatal(err)
				}
			} else {
				var err error
				if taskID, err = tasks.Enqueue(ctx, pool, tasks.Task{NodeID: nodeID, Type: api.TaskHealthProbe,
					Params: map[string]string{"tag": tag}}, time.Now()); err != nil {
					t.Fatal(err)
				}
			}
			child.waitKilled(t)

			second := startAgent(t, env, dir, "", countingRegistry(dir))
			var state string
			testutil.EventuallyWithin(t, 60*time.Second, "the task to be settled", func() bool {
				err := pool.QueryRow(ctx, `SELECT state FROM node_tasks WHERE id = $1`, taskID).Scan(&state)
				return err == nil && tasks.Finished(state)
			})
			// Every result the new hostd holds is acknowledged: nothing
			// settles later.
			testutil.Eventually(t, "the new hostd's results to be acknowledged", func() bool {
				return second.Unacked() == 0
			})
			if state != tc.state {
				t.Errorf("task settled %s; want %s", state, tc.state)
			}
			var settles int
			if err := pool.QueryRow(ctx, `SELECT count(*) FROM audit_logs WHERE action = 'task.settle' AND target_id = $1`,
				taskID).Scan(&settles); err != nil {
				t.Fatal(err)
			}
			if settles != 1 {
				t.Errorf("task settled %d times; want once", settles)
			}
			if n := countRuns(t, dir, tc.typ, tag); n != tc.runs {
				t.Errorf("handler ran %d times; want %d", n, tc.runs)
			}
			switch {
			case tc.typ != api.TaskVMRelease:
			case tc.state == hostproto.TaskSucceeded:
				waitAlloc(t, admin, allocID, api.AllocReleased)
			default:
				waitAlloc(t, admin, allocID, api.AllocReleaseFailed)
			}
			second.stop()
			// Placement skips this node from now on.
			if _, err := admin.NodeDrain(ctx, nodeID); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// childAgent is hostd run as a child process (runChildAgent).
type childAgent struct {
	cmd    *exec.Cmd
	done   chan error
	stderr *bytes.Buffer
}

// startChild starts hostd on dir in a child process that kills itself at
// step, and waits until its node is served by it (its heartbeat).
func startChild(t *testing.T, env *controldtest.Env, dir, step string) *childAgent {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), childDirEnv+"="+dir, childNATSEnv+"="+env.NATSURL, agent.CrashEnv+"="+step)
	c := &childAgent{cmd: cmd, done: make(chan error, 1), stderr: &bytes.Buffer{}}
	cmd.Stderr = c.stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { c.done <- cmd.Wait() }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-c.done
		c.done <- nil
	})
	return c
}

// waitKilled waits for the child to die of its SIGKILL.
func (c *childAgent) waitKilled(t *testing.T) {
	t.Helper()
	select {
	case err := <-c.done:
		c.done <- err
		ee, ok := err.(*exec.ExitError)
		if !ok || ee.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
			t.Fatalf("child hostd ended with %v, not its SIGKILL; its log:\n%s", err, c.stderr)
		}
	case <-time.After(60 * time.Second):
		t.Fatalf("child hostd did not reach its crash point; its log:\n%s", c.stderr)
	}
}

// countRuns counts the lines of dir/runs.log with typ whose params
// contain tag.
func countRuns(t testing.TB, dir, typ, tag string) int {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, runsFile))
	if os.IsNotExist(err) {
		return 0
	}
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, line := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(line, typ+" ") && strings.Contains(line, tag) {
			n++
		}
	}
	return n
}
