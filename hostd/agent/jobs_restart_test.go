package agent_test

import (
	"context"
	"os"
	"os/user"
	"strings"
	"testing"
	"time"

	"github.com/gpuaas/gpuaas/controld"
	"github.com/gpuaas/gpuaas/hostd/agent"
	hostenv "github.com/gpuaas/gpuaas/hostd/env"
	"github.com/gpuaas/gpuaas/hostd/tasks"
	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/testutil"
)

// selfEnvs opens every allocation's environment as this process's own
// account (as the sim does when not root): the jobs' processes are real.
type selfEnvs struct{ f *hostenv.Factory }

func (s selfEnvs) Open(context.Context, hostenv.Alloc) (hostenv.Environment, error) {
	u, err := user.Current()
	if err != nil {
		return nil, err
	}
	return s.f.POSIX(hostenv.Account{Name: u.Username, Home: os.TempDir(), Shell: "/bin/sh"}), nil
}

func newSelfEnvs(t *testing.T, dir string) *selfEnvs {
	t.Helper()
	f, err := hostenv.NewFactory(hostenv.Config{StateDir: dir, Accounts: noAccounts{}})
	if err != nil {
		t.Fatal(err)
	}
	return &selfEnvs{f: f}
}

type noAccounts struct{}

func (noAccounts) Lookup(context.Context, string) (hostenv.Account, error) {
	return hostenv.Account{}, os.ErrNotExist
}

// TestJobLostWhenHostdRestartsMidJob is decision 0015 end to end with a
// real controld and agent: a job runs (supervised by the agent, followed
// by a job.wait); hostd stops past its drain timeout and starts again
// (a new hostd: it knows no job); the job ends lost with the reason, and
// its allocation (release: on-exit) is released — no silent hang.
func TestJobLostWhenHostdRestartsMidJob(t *testing.T) {
	t.Parallel()
	env, admin := fleet(t, controld.HostsConfig{})
	host := newFakeHost()
	reg := host.registry()
	for _, typ := range []string{api.TaskJobStart, api.TaskJobWait, api.TaskJobStop} {
		reg[typ] = tasks.Default()[typ]
	}
	dir := t.TempDir()
	withJobs := func(c *agent.Config) {
		c.DrainTimeout = 100 * time.Millisecond
		c.Env = &tasks.Env{Envs: newSelfEnvs(t, dir)} // a new one per start, as hostd makes
	}
	a := startAgent(t, env, dir, enroll(t, admin, "node-j"), reg, withJobs)
	readyNode(t, admin, a.NodeID())
	ctx := context.Background()
	al, err := admin.AllocCreate(ctx, api.AllocCreateRequest{SKU: "h200-slice", GPUs: 4})
	if err != nil {
		t.Fatal(err)
	}
	waitAlloc(t, admin, al.ID, api.AllocActive)
	j, err := admin.JobCreate(ctx, api.JobCreateRequest{AllocationID: al.ID, Run: "sleep 20"})
	if err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, "the job to run", func() bool {
		got, err := admin.JobGet(ctx, j.ID)
		return err == nil && got.State == api.JobRunning
	})
	// The job.wait that follows it is with the node.
	testutil.Eventually(t, "job.wait to be accepted", func() bool {
		var n int
		err := env.Server.Pool().QueryRow(ctx, `SELECT count(*) FROM node_tasks WHERE type = $1 AND state IN ('accepted', 'running')`,
			api.TaskJobWait).Scan(&n)
		return err == nil && n == 1
	})
	a.stop()
	startAgent(t, env, dir, "", reg, withJobs)
	var lost *api.Job
	testutil.Eventually(t, "the job to be lost", func() bool {
		lost, err = admin.JobGet(ctx, j.ID)
		return err == nil && lost.State == api.JobLost
	})
	if !strings.Contains(lost.Reason, "hostd stopped") || lost.ExitCode != nil {
		t.Errorf("lost job %+v; want the reason, no exit code", lost)
	}
	released := waitAlloc(t, admin, al.ID, api.AllocReleased)
	if released.Reason != api.JobReleaseReason {
		t.Errorf("allocation released with %q; want %q", released.Reason, api.JobReleaseReason)
	}
}
