package controld_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/gpuaas/gpuaas/controld/controldtest"
	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/logstream"
)

// tinyWorkload starts controld with the tiny image published, verified
// and promoted, and runs it as a workload on an active bare-metal
// allocation of the admin's.
func tinyWorkload(t *testing.T) (*controldtest.Env, *api.Client, *api.Workload) {
	t.Helper()
	env := controldtest.Start(t, controldtest.Options{Registry: testRegistry(t)})
	ctx := t.Context()
	admin := env.UserClient(t, env.Admin.ID, env.AdminToken)
	if _, err := admin.ImagePublish(ctx, api.ImagePublishRequest{Name: "tiny", Ref: pushTestImage(t, admin, "tiny"), Platform: true}); err != nil {
		t.Fatal(err)
	}
	if _, err := verify(t, admin, "tiny"); err != nil {
		t.Fatal(err)
	}
	if _, err := admin.ImagePromote(ctx, api.ImageChangeRequest{Image: "tiny"}); err != nil {
		t.Fatal(err)
	}
	a, err := admin.AllocCreate(ctx, api.AllocCreateRequest{SKU: "h100-baremetal", GPUs: 8})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := env.Server.Pool().Exec(ctx, `UPDATE allocations SET state = 'active' WHERE id = $1`, a.ID); err != nil {
		t.Fatal(err)
	}
	w, err := admin.AppRun(ctx, api.AppRunRequest{Image: "tiny", AllocationID: a.ID, Name: "web"})
	if err != nil {
		t.Fatal(err)
	}
	if w.NodeID == "" {
		t.Fatalf("workload %+v: no node", w)
	}
	return env, admin, w
}

// followApp reads a workload's log as `gpuaas app logs -f` does, from
// after/cursor, a page of limit lines at a time, until stop says so or
// the workload ended and its last line came.
func followApp(t *testing.T, c *api.Client, id string, after int64, cursor uint64, stop func([]api.LogLine) bool) ([]api.LogLine, *api.AppLogsResponse) {
	t.Helper()
	var lines []api.LogLine
	deadline := time.Now().Add(time.Minute)
	for time.Now().Before(deadline) {
		p, err := c.AppLogs(context.Background(), api.AppLogsRequest{ID: id, After: after, Cursor: cursor, Limit: 7, Wait: time.Second})
		if err != nil {
			t.Fatalf("app.logs: %v", err)
		}
		lines = append(lines, p.Lines...)
		after, cursor = p.After, p.Cursor
		if p.Ended || (stop != nil && stop(lines)) {
			return lines, p
		}
	}
	t.Fatalf("following %s: not ended after a minute (%d lines)", id, len(lines))
	return nil, nil
}

// TestAppLogsReadsTheWorkloadsLog: app.logs is job.logs for a workload:
// the lines its node published on the workload's LOGS subject, numbered,
// paged and resumed from the last line seen on a new connection, ended
// only once the workload ended and its last line was read; a viewer of
// the project reads it, another project's user is refused as by app.get,
// and bad input is refused by name.
func TestAppLogsReadsTheWorkloadsLog(t *testing.T) {
	t.Parallel()
	env, admin, w := tinyWorkload(t)
	ctx := t.Context()
	// Nothing published yet: an empty page, not ended.
	if p, err := admin.AppLogs(ctx, api.AppLogsRequest{ID: w.ID}); err != nil || len(p.Lines) != 0 || p.Ended {
		t.Fatalf("before any line: %+v, %v; want an empty page, not ended", p, err)
	}
	// The node's pump publishes 30 lines on the workload's subject (as
	// hostd does), 20 now and 10 after the follower was cut.
	js, err := jetstream.New(env.NC)
	if err != nil {
		t.Fatal(err)
	}
	pump, err := logstream.NewPump(logstream.PumpConfig{Publisher: js, ID: w.ID,
		Subject: logstream.Subject(w.NodeID, logstream.KindWorkload, w.ID)})
	if err != nil {
		t.Fatal(err)
	}
	for i := 1; i <= 20; i++ {
		fmt.Fprintf(pump.Stdout(), "line %d\n", i)
	}
	first, p := followApp(t, admin, w.ID, 0, 0, func(l []api.LogLine) bool { return len(l) >= 20 })
	if p.State == "" || p.Ended {
		t.Fatalf("page %+v; want the workload's state, not ended", p)
	}
	admin.Conn().Close()
	again := env.UserClient(t, env.Admin.ID, env.AdminToken)
	for i := 21; i <= 30; i++ {
		fmt.Fprintf(pump.Stderr(), "line %d\n", i)
	}
	pump.Close(ctx)
	more, p2 := followApp(t, again, w.ID, p.After, p.Cursor, func(l []api.LogLine) bool { return len(l) >= 10 })
	if p2.Ended {
		t.Fatalf("page %+v ended while the workload runs", p2)
	}
	lines := append(first, more...)
	if len(lines) != 30 {
		t.Fatalf("got %d lines; want 30", len(lines))
	}
	for i, l := range lines {
		if l.Seq != int64(i+1) || l.Text != fmt.Sprintf("line %d", i+1) {
			t.Fatalf("line %d: %+v; want line %d numbered %d", i, l, i+1, i+1)
		}
	}
	if lines[25].Stream != api.LogStderr {
		t.Fatalf("line 26 on %q; want stderr", lines[25].Stream)
	}
	// Ended once the workload ended and nothing is left.
	if _, err := env.Server.Pool().Exec(ctx, `UPDATE workloads SET state = 'stopped', ended_at = now() WHERE id = $1`, w.ID); err != nil {
		t.Fatal(err)
	}
	if p, err := again.AppLogs(ctx, api.AppLogsRequest{ID: w.ID, After: 25, Limit: 2}); err != nil || !p.Ended || len(p.Lines) != 5 {
		t.Fatalf("after its end: %+v, %v; want the last 5 lines, ended", p, err)
	}

	// Another project's user is refused as app.get refuses them.
	_, bobToken := env.AddUser(t, "bob@example.test", api.RoleUser)
	bob := env.Client(bobToken)
	_, getErr := bob.AppGet(ctx, w.ID)
	_, logErr := bob.AppLogs(ctx, api.AppLogsRequest{ID: w.ID})
	if logErr == nil || api.CodeOf(logErr) != api.CodeOf(getErr) {
		t.Fatalf("bob's app.logs: %v; want refused as app.get is (%v)", logErr, getErr)
	}
	// A viewer of the project reads it.
	_, carolToken := env.AddUser(t, "carol@example.test", api.RoleUser)
	if _, err := again.ProjectAddMember(ctx, api.AddMemberRequest{Project: controldtest.ProjectName, Email: "carol@example.test",
		Role: api.ProjectViewer}, api.WithIdempotencyKey(api.NewIdempotencyKey())); err != nil {
		t.Fatal(err)
	}
	if p, err := env.Client(carolToken).AppLogs(ctx, api.AppLogsRequest{ID: w.ID}); err != nil || len(p.Lines) != 30 {
		t.Fatalf("viewer's app.logs: %+v, %v; want 30 lines", p, err)
	}
	for _, req := range []api.AppLogsRequest{{ID: w.ID, Limit: -1}, {ID: w.ID, Wait: time.Minute}, {ID: w.ID, After: -3}} {
		if _, err := again.AppLogs(ctx, req); api.CodeOf(err) != api.CodeInvalidArgument {
			t.Errorf("app.logs %+v: %v; want invalid_argument", req, err)
		}
	}
}
