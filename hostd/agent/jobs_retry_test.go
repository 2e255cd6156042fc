package agent_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gpuaas/gpuaas/controld"
	"github.com/gpuaas/gpuaas/controld/controldtest"
	"github.com/gpuaas/gpuaas/hostd/agent"
	"github.com/gpuaas/gpuaas/hostd/tasks"
	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/testutil"
)

// TestLostJobRetriedAfterHostdRestart is a job's retries end to end with
// a real controld, agent and JetStream (docs/jobs.md "Retries"): a job
// with retries: 1 runs and prints; hostd stops past its drain timeout
// and starts again (a new hostd: it knows no job), so the job is lost;
// controld starts it again as attempt 2 on the same allocation, which
// ends with its own exit code (3: never retried). The log keeps one
// numbering, attempt 1's line, then the attempt marker once, then
// attempt 2's.
func TestLostJobRetriedAfterHostdRestart(t *testing.T) {
	t.Parallel()
	env := controldtest.Start(t, controldtest.Options{NoNodes: true,
		Hosts: controld.HostsConfig{HeartbeatInterval: 200 * time.Millisecond, AutoApproveSlots: true}})
	admin := env.UserClient(t, env.Admin.ID, env.AdminToken)
	reg := newFakeHost().registry()
	for _, typ := range []string{api.TaskJobStart, api.TaskJobWait, api.TaskJobStop} {
		reg[typ] = tasks.Default()[typ]
	}
	dir := t.TempDir()
	withJobs := func(c *agent.Config) {
		c.DrainTimeout = 100 * time.Millisecond
		c.Env = &tasks.Env{Envs: newSelfEnvs(t, dir)} // a new one per start, as hostd makes
	}
	a := startAgent(t, env, dir, enroll(t, admin, "node-r"), reg, withJobs)
	readyNode(t, admin, a.NodeID())
	ctx := context.Background()
	al, err := admin.AllocCreate(ctx, api.AllocCreateRequest{SKU: "h200-slice", GPUs: 4})
	if err != nil {
		t.Fatal(err)
	}
	waitAlloc(t, admin, al.ID, api.AllocActive)
	tmp := t.TempDir()
	ran, goOn := filepath.Join(tmp, "ran"), filepath.Join(tmp, "go-on")
	j, err := admin.JobCreate(ctx, api.JobCreateRequest{AllocationID: al.ID, Retries: 1,
		Run: fmt.Sprintf(`if [ -e %[1]s ]; then while [ ! -e %[2]s ]; do sleep 0.05; done; echo second; exit 3; fi
touch %[1]s; echo first; sleep 30`, ran, goOn)})
	if err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, "attempt 1 to print and be followed by a job.wait", func() bool {
		p, err := admin.JobLogs(ctx, api.JobLogsRequest{ID: j.ID})
		var n int
		_ = env.Server.Pool().QueryRow(ctx, `SELECT count(*) FROM node_tasks WHERE type = $1 AND state IN ('accepted', 'running')`,
			api.TaskJobWait).Scan(&n)
		return err == nil && len(p.Lines) == 1 && n == 1
	})
	a.stop()
	startAgent(t, env, dir, "", reg, withJobs)
	var got *api.Job
	testutil.EventuallyWithin(t, time.Minute, "attempt 2 to run", func() bool {
		got, err = admin.JobGet(ctx, j.ID)
		return err == nil && got.Attempt == 2 && got.State == api.JobRunning
	})
	// controld restarts while attempt 2 runs: the new one follows it
	// and starts no other attempt.
	env.Restart(t, nil)
	if err := os.WriteFile(goOn, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	testutil.EventuallyWithin(t, time.Minute, "attempt 2 to end", func() bool {
		got, err = admin.JobGet(ctx, j.ID)
		return err == nil && api.JobFinal(got.State)
	})
	if got.State != api.JobFailed || got.Attempt != 2 || got.ExitCode == nil || *got.ExitCode != 3 {
		t.Fatalf("job %+v; want failed with exit 3 at attempt 2", got)
	}
	var starts int
	if err := env.Server.Pool().QueryRow(ctx, `SELECT count(*) FROM node_tasks WHERE type = $1 AND params->>'job_id' = $2`,
		api.TaskJobStart, j.ID).Scan(&starts); err != nil || starts != 2 {
		t.Errorf("%d job.start tasks (%v); want 2, one per attempt", starts, err)
	}
	p, err := admin.JobLogs(ctx, api.JobLogsRequest{ID: j.ID, Limit: 100})
	if err != nil {
		t.Fatal(err)
	}
	var texts []string
	for i, l := range p.Lines {
		if l.Seq != int64(i+1) {
			t.Errorf("line %d numbered %d; want one numbering across attempts", i+1, l.Seq)
		}
		texts = append(texts, l.Text)
	}
	if len(texts) != 3 || texts[0] != "first" || !strings.Contains(texts[1], "--- attempt 2 (hostd stopped") ||
		p.Lines[1].Stream != "gpuaas" || texts[2] != "second" {
		t.Errorf("log %q; want first, the attempt 2 marker, second", texts)
	}
	if released := waitAlloc(t, admin, al.ID, api.AllocReleased); released.Reason != api.JobReleaseReason {
		t.Errorf("allocation released with %q; want %q", released.Reason, api.JobReleaseReason)
	}
}
