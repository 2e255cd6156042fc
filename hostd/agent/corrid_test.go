package agent_test

import (
	"context"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/gpuaas/gpuaas/controld"
	"github.com/gpuaas/gpuaas/controld/controldtest"
	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/testutil"
)

// TestCorrelationIDFollowsCreateThroughHost creates an allocation with a
// known correlation id through controld and a real agent: the id is on
// controld's request line, its dispatch of the task, every line hostd
// logs about the task, controld's line applying the result, and on the
// events the create and its result made — so one id finds the whole
// story.
func TestCorrelationIDFollowsCreateThroughHost(t *testing.T) {
	t.Parallel()
	ctlLog, ctlLines := testutil.CaptureLog(t)
	hostLog, hostLines := testutil.CaptureLog(t)
	env := controldtest.Start(t, controldtest.Options{NoNodes: true, Log: ctlLog,
		Hosts: controld.HostsConfig{HeartbeatInterval: 200 * time.Millisecond, AutoApproveSlots: true}})
	admin := env.Client(env.AdminToken)
	a := startAgentLogging(t, env, t.TempDir(), enroll(t, admin, "node-c"), newFakeHost().registry(), hostLog)
	readyNode(t, admin, a.NodeID())

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	events, err := env.UserClient(t, env.Admin.ID, env.AdminToken).SubscribeEvents(ctx, env.Admin.ID)
	if err != nil {
		t.Fatal(err)
	}
	const id = "itest-create-7f3a"
	user := env.Client(env.AdminToken, api.WithCorrelation(id))
	al, err := user.AllocCreate(ctx, api.AllocCreateRequest{SKU: "h200-slice", GPUs: 2})
	if err != nil {
		t.Fatal(err)
	}
	waitAlloc(t, admin, al.ID, api.AllocActive)

	// The events: the create's (→ provisioning) and its result's
	// (→ active) carry the id.
	corrs := map[string]string{} // alloc.state "to" → corr
	for corrs[api.AllocActive] == "" {
		select {
		case ev := <-events:
			if ev.Kind == api.EventAllocState && ev.Subject == al.ID {
				corrs[stateTo(t, ev)] = ev.Corr
			}
		case <-ctx.Done():
			t.Fatalf("no alloc.state event to active for %s; got %v", al.ID, corrs)
		}
	}
	for _, to := range []string{api.AllocProvisioning, api.AllocActive} {
		if corrs[to] != id {
			t.Errorf("event to %s has corr %q; want %q", to, corrs[to], id)
		}
	}

	corr := "corr=" + id
	testutil.Eventually(t, "controld's line applying the result", func() bool {
		return len(ctlLines.Lines(corr, "task result applied")) > 0 && len(hostLines.Lines(corr, "result delivered")) > 0
	})
	for _, want := range [][]string{{"msg=request", "endpoint=alloc.create", "code=ok"}, {"msg=\"dispatching task\""},
		{"msg=\"task result applied\"", "status=succeeded"}} {
		if len(ctlLines.Lines(append(want, corr)...)) == 0 {
			t.Errorf("controld logged no line with %s and %q", corr, want)
		}
	}
	dispatched := ctlLines.Lines(corr, "msg=\"dispatching task\"", "type="+api.TaskVMProvision)
	if len(dispatched) == 0 {
		t.Fatalf("no dispatch line of the provisioning task with %s", corr)
	}
	task := regexp.MustCompile(`task=(\S+)`).FindStringSubmatch(dispatched[0])[1]
	taskLines := hostLines.Lines("task=" + task)
	for _, want := range []string{"task accepted", "task phase", "task finished", "result delivered"} {
		if len(hostLines.Lines(corr, want)) == 0 {
			t.Errorf("hostd logged no %q line with %s", want, corr)
		}
	}
	for _, l := range taskLines {
		if !strings.Contains(l, corr) {
			t.Errorf("hostd line about %s without %s: %s", task, corr, l)
		}
	}
	if len(taskLines) < 4 {
		t.Errorf("hostd logged %d lines about %s; want at least 4 (accepted, phases, finished, delivered)", len(taskLines), task)
	}

	// The same lines, with the id, reach an operator through node.logs.
	logs, err := admin.NodeLogs(ctx, api.NodeLogsRequest{Node: a.NodeID(), Since: "10m"})
	if err != nil {
		t.Fatal(err)
	}
	var finished bool
	for _, r := range logs.Records {
		finished = finished || r.Msg == "task finished" && r.Attrs["task"] == task && r.Attrs["corr"] == id
	}
	if !finished {
		t.Errorf("node.logs has no \"task finished\" record of %s with corr %s: %+v", task, id, logs.Records)
	}
}

// stateTo reads the "to" of an alloc.state event.
func stateTo(t *testing.T, ev api.Event) string {
	t.Helper()
	m := regexp.MustCompile(`"to":"([a-z_]+)"`).FindSubmatch(ev.Data)
	if m == nil {
		t.Fatalf("alloc.state event without to: %s", ev.Data)
	}
	return string(m[1])
}
