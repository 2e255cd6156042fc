package agent_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/gpuaas/gpuaas/controld"
	"github.com/gpuaas/gpuaas/controld/controldtest"
	"github.com/gpuaas/gpuaas/hostd/agent"
	hostenv "github.com/gpuaas/gpuaas/hostd/env"
	"github.com/gpuaas/gpuaas/hostd/tasks"
	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/logstream"
	"github.com/gpuaas/gpuaas/internal/testutil"
)

// jobLogFleet is a real controld (job logs bounded at jobLogBound) and
// one agent running jobs as this process's user, with an active
// allocation of the admin's project.
func jobLogFleet(t testing.TB, jobLogBound int64) (*controldtest.Env, *api.Client, string) {
	t.Helper()
	env := controldtest.Start(t, controldtest.Options{NoNodes: true,
		Hosts:   controld.HostsConfig{HeartbeatInterval: 200 * time.Millisecond, AutoApproveSlots: true},
		Streams: controld.StreamLimits{JobLogMaxBytes: jobLogBound}})
	admin := env.UserClient(t, env.Admin.ID, env.AdminToken)
	reg := newFakeHost().registry()
	for _, typ := range []string{api.TaskJobStart, api.TaskJobWait, api.TaskJobStop} {
		reg[typ] = tasks.Default()[typ]
	}
	dir := t.TempDir()
	a := startAgent(t, env, dir, enroll(t, admin, "node-logs"), reg, func(c *agent.Config) {
		c.Env = &tasks.Env{Envs: selfEnvsTB(t, dir)}
	})
	readyNode(t, admin, a.NodeID())
	al, err := admin.AllocCreate(context.Background(), api.AllocCreateRequest{SKU: "h200-slice", GPUs: 4})
	if err != nil {
		t.Fatal(err)
	}
	waitAlloc(t, admin, al.ID, api.AllocActive)
	return env, admin, al.ID
}

// selfEnvs is newSelfEnvs for benchmarks too.
func selfEnvsTB(t testing.TB, dir string) *selfEnvs {
	t.Helper()
	f, err := hostenv.NewFactory(hostenv.Config{StateDir: dir, Accounts: noAccounts{}})
	if err != nil {
		t.Fatal(err)
	}
	return &selfEnvs{f: f}
}

// follow reads a job's log as `gpuaas job logs -f` does, from after,
// until the job ended and its last line came, or until stop says so.
func follow(t *testing.T, c *api.Client, id string, after int64, cursor uint64, stop func([]api.LogLine) bool) (lines []api.LogLine, live bool, lastAfter int64, lastCursor uint64) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for time.Now().Before(deadline) {
		p, err := c.JobLogs(context.Background(), api.JobLogsRequest{ID: id, After: after, Cursor: cursor, Limit: 7, Wait: 2 * time.Second})
		if err != nil {
			// No controld for a while (restarting): try again from the
			// last line seen, as the CLI does.
			if code := api.CodeOf(err); code == api.CodeUnavailable || code == api.CodeInternal {
				time.Sleep(100 * time.Millisecond)
				continue
			}
			t.Errorf("job.logs: %v", err)
			return lines, live, after, cursor
		}
		lines = append(lines, p.Lines...)
		live = live || (len(p.Lines) > 0 && !api.JobFinal(p.State))
		after, cursor = p.After, p.Cursor
		if p.Ended || (stop != nil && stop(lines)) {
			return lines, live, after, cursor
		}
	}
	t.Errorf("following %s: still not ended after a minute (%d lines)", id, len(lines))
	return lines, live, after, cursor
}

// TestJobLogsFollowedLiveAcrossAReconnect: a job prints a counter on
// stdout and stderr over time; a follower gets its lines while it runs,
// is cut off (its connection closed) halfway and resumes on a new one
// from the last line it saw: every line once, in order, stdout and
// stderr apart, each with its time. The log stays readable after the
// allocation is released, and no one outside the project reads it.
func TestJobLogsFollowedLiveAcrossAReconnect(t *testing.T) {
	t.Parallel()
	env, admin, allocID := jobLogFleet(t, 0)
	ctx := context.Background()
	j, err := admin.JobCreate(ctx, api.JobCreateRequest{AllocationID: allocID,
		Run: `i=1; while [ $i -le 30 ]; do echo "out $i"; echo "err $i" >&2; sleep 0.05; i=$((i+1)); done`})
	if err != nil {
		t.Fatal(err)
	}
	first, live, after, cursor := follow(t, admin, j.ID, 0, 0, func(l []api.LogLine) bool { return len(l) >= 20 })
	// Cut: the follower's connection goes, a new one resumes.
	admin.Conn().Close()
	again := env.UserClient(t, env.Admin.ID, env.AdminToken)
	rest, live2, _, _ := follow(t, again, j.ID, after, cursor, nil)
	lines := append(first, rest...)
	if !live && !live2 {
		t.Error("no line arrived while the job ran; want them live")
	}
	checkJobLog(t, lines, 30)
	got, err := again.JobGet(ctx, j.ID)
	if err != nil || got.State != api.JobSucceeded {
		t.Fatalf("job %+v, %v; want succeeded", got, err)
	}

	// Released (on-exit): the log is still there, whole.
	waitAlloc(t, again, allocID, api.AllocReleased)
	all, _, _, _ := follow(t, again, j.ID, 0, 0, nil)
	checkJobLog(t, all, 30)
	// --since: only lines written at or after a time.
	mid := all[30].Time
	since, err := again.JobLogs(ctx, api.JobLogsRequest{ID: j.ID, Since: mid})
	if err != nil || len(since.Lines) == 0 || since.Lines[0].Time.Before(mid) || since.Lines[len(since.Lines)-1].Seq != 60 {
		t.Fatalf("since %v: %+v, %v; want the lines from then on", mid, since, err)
	}

	// Someone outside the project is refused, as by job.get.
	_, bobToken := env.AddUser(t, "bob@example.test", api.RoleUser)
	bob := env.Client(bobToken)
	_, getErr := bob.JobGet(ctx, j.ID)
	_, logErr := bob.JobLogs(ctx, api.JobLogsRequest{ID: j.ID})
	if logErr == nil || api.CodeOf(logErr) != api.CodeOf(getErr) {
		t.Fatalf("bob's job.logs: %v; want refused as job.get is (%v)", logErr, getErr)
	}
	// A viewer of the project reads it.
	_, carolToken := env.AddUser(t, "carol@example.test", api.RoleUser)
	if _, err := again.ProjectAddMember(ctx, api.AddMemberRequest{Project: env.Project.Name, Email: "carol@example.test",
		Role: api.ProjectViewer}, api.WithIdempotencyKey(api.NewIdempotencyKey())); err != nil {
		t.Fatal(err)
	}
	if p, err := env.Client(carolToken).JobLogs(ctx, api.JobLogsRequest{ID: j.ID}); err != nil || len(p.Lines) != 60 {
		t.Fatalf("viewer's job.logs: %d lines, %v; want 60", len(p.Lines), err)
	}
	// Bad input is refused by name.
	for _, req := range []api.JobLogsRequest{{ID: j.ID, Limit: -1}, {ID: j.ID, Wait: time.Minute}, {ID: j.ID, After: -3}} {
		if _, err := again.JobLogs(ctx, req); api.CodeOf(err) != api.CodeInvalidArgument {
			t.Errorf("job.logs %+v: %v; want invalid_argument", req, err)
		}
	}
}

// TestJobLogsFollowSurvivesAControldRestart: controld is restarted
// while a job's log is followed; the follower goes on from the last line
// it saw, with every line once, in order.
func TestJobLogsFollowSurvivesAControldRestart(t *testing.T) {
	t.Parallel()
	env, admin, allocID := jobLogFleet(t, 0)
	ctx := context.Background()
	// The job prints half its lines, then waits for gate, which the test
	// opens only after the restart: the job is still running whatever
	// time the restart takes on a loaded machine.
	gate := filepath.Join(t.TempDir(), "gate")
	j, err := admin.JobCreate(ctx, api.JobCreateRequest{AllocationID: allocID,
		Run: fmt.Sprintf(`i=1; while [ $i -le 40 ]; do
			if [ $i -eq 21 ]; then while [ ! -e %s ]; do sleep 0.05; done; fi
			echo "out $i"; echo "err $i" >&2; sleep 0.1; i=$((i+1)); done`, gate)})
	if err != nil {
		t.Fatal(err)
	}
	first, _, after, cursor := follow(t, admin, j.ID, 0, 0, func(l []api.LogLine) bool { return len(l) >= 10 })
	followed := make(chan []api.LogLine)
	go func() {
		rest, _, _, _ := follow(t, admin, j.ID, after, cursor, nil)
		followed <- rest
	}()
	env.Restart(t, nil)
	if got, err := admin.JobGet(ctx, j.ID); err != nil || api.JobFinal(got.State) {
		t.Fatalf("job %+v, %v after the restart; want it still running (restarted mid-follow)", got, err)
	}
	if err := os.WriteFile(gate, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	checkJobLog(t, append(first, <-followed...), 40)
}

// checkJobLog fails unless lines are 1..2n without a gap, the counter's
// stdout and stderr lines each in order.
func checkJobLog(t *testing.T, lines []api.LogLine, n int) {
	t.Helper()
	var out, errs []string
	for i, l := range lines {
		if l.Seq != int64(i+1) {
			t.Fatalf("line %d is numbered %d; want %d (a line lost or repeated)", i, l.Seq, i+1)
		}
		if l.Time.IsZero() {
			t.Fatalf("line %d has no time", l.Seq)
		}
		switch l.Stream {
		case api.LogStdout:
			out = append(out, l.Text)
		case api.LogStderr:
			errs = append(errs, l.Text)
		}
	}
	if len(lines) != 2*n || len(out) != n {
		t.Fatalf("got %d lines, %d on stdout; want %d, %d", len(lines), len(out), 2*n, n)
	}
	for i := range n {
		if out[i] != fmt.Sprintf("out %d", i+1) || errs[i] != fmt.Sprintf("err %d", i+1) {
			t.Fatalf("line pair %d: %q, %q; want out %d, err %d", i, out[i], errs[i], i+1, i+1)
		}
	}
}

// TestJobLogCutAtItsBound: a job prints far more than the configured
// bound of a job's log; its log is cut there with a marker, the last line
// says how much was not kept, and the LOGS stream holds about the bound.
func TestJobLogCutAtItsBound(t *testing.T) {
	t.Parallel()
	const bound = 32 << 10
	env, admin, allocID := jobLogFleet(t, bound)
	ctx := context.Background()
	// 100-byte lines, 4 MB: 128 times the bound.
	j, err := admin.JobCreate(ctx, api.JobCreateRequest{AllocationID: allocID,
		Run: `yes 012345678901234567890123456789012345678901234567890123456789012345678901234567890123456789012345678 | head -n 40000`})
	if err != nil {
		t.Fatal(err)
	}
	lines, _, _, _ := follow(t, admin, j.ID, 0, 0, nil)
	kept := bound / 100
	if len(lines) != kept+2 {
		t.Fatalf("got %d lines; want %d kept and two markers", len(lines), kept)
	}
	if m := lines[kept]; m.Stream != api.LogMarker || !strings.Contains(m.Text, "output cut") {
		t.Errorf("line %d: %+v; want the cut marker", kept+1, m)
	}
	if m := lines[kept+1]; m.Stream != api.LogMarker || !strings.Contains(m.Text, fmt.Sprintf("%d bytes of output past the bound", 40000*100-kept*100)) {
		t.Errorf("last line %+v; want it to say how much was not kept", m)
	}
	js, err := jetstream.New(env.NC)
	if err != nil {
		t.Fatal(err)
	}
	st, err := js.Stream(ctx, logstream.Stream)
	if err != nil {
		t.Fatal(err)
	}
	info, err := st.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if info.State.Bytes > 2*bound {
		t.Fatalf("LOGS holds %d bytes for a job bounded at %d", info.State.Bytes, bound)
	}
	testutil.Eventually(t, "the job to end", func() bool {
		got, err := admin.JobGet(ctx, j.ID)
		return err == nil && got.State == api.JobSucceeded
	})
}
