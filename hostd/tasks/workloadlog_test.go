package tasks_test

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/gpuaas/gpuaas/hostd/tasks"
	"github.com/gpuaas/gpuaas/hostd/workload/workloadtest"
	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/hostproto"
	"github.com/gpuaas/gpuaas/internal/logstream"
	"github.com/gpuaas/gpuaas/internal/testutil"
)

// readWorkloadLog reads a workload's whole log from LOGS, as app.logs
// pages through it.
func readWorkloadLog(t *testing.T, js jetstream.JetStream, node, id string) []logstream.Line {
	t.Helper()
	var all []logstream.Line
	q := logstream.Query{Subject: logstream.Subject(node, logstream.KindWorkload, id), Limit: 100}
	for {
		p, err := logstream.Read(context.Background(), js, q)
		if err != nil {
			t.Fatal(err)
		}
		all = append(all, p.Lines...)
		if len(p.Lines) > 0 {
			q.After = p.Lines[len(p.Lines)-1].Seq
		}
		q.Cursor = p.Cursor
		if p.CaughtUp {
			return all
		}
	}
}

// TestWorkloadLogSurvivesAHostdRestart, with real rootless podman and a
// real bus with auth: a container prints a counter; hostd pumps its
// output to LOGS as it comes, stops while the container runs (the
// container runs on: podman's conmon is not hostd's child) and starts
// again, re-attaching from its state file; the log holds the counter
// whole — every line once, in order, on its stream, numbered without a gap
// or a repeat — and the container's end is reported after its last line.
func TestWorkloadLogSurvivesAHostdRestart(t *testing.T) {
	_, env := podmanHost(t)
	bus := testutil.NATS(t)
	js, err := jetstream.New(bus.Connect(t))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := js.CreateOrUpdateStream(context.Background(), logstream.StreamConfig(1,
		logstream.Limits{MaxBytes: 64 << 20, MaxAge: time.Hour})); err != nil {
		t.Fatal(err)
	}
	env.Logs = js
	reg := workloadtest.Registry(t)
	ref := workloadtest.Push(t, reg, "test/wlapp", nil)
	alloc := "a-wll" + strconv.Itoa(os.Getpid())
	provisionTenant(t, env, alloc)
	stop := tasks.FollowWorkloadLogs(env) // hostd starts
	const lines = 150
	out, _, err := run(t, env, api.TaskWorkloadStart, hostproto.WorkloadStartParams{WorkloadID: "w-count", AllocationID: alloc,
		PosixUser: api.PosixUser(alloc), Image: ref, Command: []string{workloadtest.App, "count", strconv.Itoa(lines), "40ms"}})
	if r := wlReport(t, out, err); r.State != api.ContainerRunning {
		t.Fatalf("start: %+v; want running", r)
	}
	testutil.Eventually(t, "the first 30 lines in LOGS", func() bool {
		return len(readWorkloadLog(t, js, env.NodeID, "w-count")) >= 30
	})
	stop() // hostd stops
	before := len(readWorkloadLog(t, js, env.NodeID, "w-count"))
	// The container runs on and writes while no hostd reads.
	testutil.Eventually(t, "the container writing on without hostd", func() bool {
		state := strings.TrimSpace(asTenant(t, env, alloc, "container", "inspect", "--format", "{{.State.Status}}", "gpuaas-w-count"))
		logs := asTenant(t, env, alloc, "logs", "gpuaas-w-count")
		return state == "running" && strings.Count(logs, "\n") >= before+20
	})
	if got := len(readWorkloadLog(t, js, env.NodeID, "w-count")); got != before {
		t.Fatalf("%d lines in LOGS while hostd was stopped; want %d", got, before)
	}
	stop = tasks.FollowWorkloadLogs(env) // hostd starts again: re-attaches
	defer stop()
	var r hostproto.WorkloadReport
	testutil.Eventually(t, "the container to end", func() bool {
		r = wlStatus(t, env, alloc, "w-count")
		return r.State == api.ContainerExited
	})
	if r.ExitCode != 0 {
		t.Fatalf("ended %+v; want exit 0", r)
	}
	// Reported ended: its last line is in LOGS already.
	got := readWorkloadLog(t, js, env.NodeID, "w-count")
	if len(got) != lines {
		t.Fatalf("%d lines in LOGS; want %d", len(got), lines)
	}
	// conmon reads stdout and stderr from two pipes and writes each line
	// to the one log file as it reads it, so a line may overtake the other
	// stream's line written just before it (conmon waiting for a CPU);
	// within a stream the order is the container's. So: numbered 1…N, and
	// each stream holds its lines of the counter whole and in order.
	gotBy, wantBy := map[string][]string{}, map[string][]string{}
	for i, l := range got {
		if l.Seq != int64(i+1) || l.Time.IsZero() {
			t.Fatalf("line %d: %+v; want it numbered %d, with a time", i, l, i+1)
		}
		gotBy[l.Stream] = append(gotBy[l.Stream], l.Text)
		stream := logstream.Stdout
		if (i+1)%4 == 0 {
			stream = logstream.Stderr
		}
		wantBy[stream] = append(wantBy[stream], fmt.Sprintf("n %d", i+1))
	}
	for _, stream := range []string{logstream.Stdout, logstream.Stderr} {
		if !slices.Equal(gotBy[stream], wantBy[stream]) {
			t.Fatalf("%s: %q; want %q", stream, gotBy[stream], wantBy[stream])
		}
	}

	// Released while a workload runs: its last lines (after SIGTERM) are
	// in LOGS, and no process of the user is left to stop its removal
	// (usermod refuses a user with processes).
	out, _, err = run(t, env, api.TaskWorkloadStart, hostproto.WorkloadStartParams{WorkloadID: "w-serve", AllocationID: alloc,
		PosixUser: api.PosixUser(alloc), Image: ref, Command: []string{workloadtest.App, "serve"}})
	if r := wlReport(t, out, err); r.State != api.ContainerRunning {
		t.Fatalf("start: %+v; want running", r)
	}
	testutil.Eventually(t, "the server's first line", func() bool {
		return len(readWorkloadLog(t, js, env.NodeID, "w-serve")) == 1
	})
	if _, _, err := run(t, env, api.TaskDeprovisionUser, hostproto.UserDeprovisionParams{AllocationID: alloc,
		PosixUser: api.PosixUser(alloc)}); err != nil {
		t.Fatalf("release with a workload followed: %v", err)
	}
	if got := readWorkloadLog(t, js, env.NodeID, "w-serve"); len(got) != 2 || got[1].Text != "got SIGTERM" {
		t.Fatalf("released workload's log: %+v; want its first line and the one after SIGTERM", got)
	}
}
