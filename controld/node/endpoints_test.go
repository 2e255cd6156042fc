package node_test

import (
	"context"
	"encoding/json"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/nats-io/nats.go"

	"github.com/gpuaas/gpuaas/controld/endpoint/endpointtest"
	"github.com/gpuaas/gpuaas/controld/node"
	"github.com/gpuaas/gpuaas/controld/storetest"
	"github.com/gpuaas/gpuaas/controld/volumes"
	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/hostproto"
	"github.com/gpuaas/gpuaas/internal/testutil"
)

// ops is a database with node's endpoints over it, a real bus for the
// nodes' hostd, and a count of the scheduler's wake-ups.
type ops struct {
	pool *pgxpool.Pool
	nc   *nats.Conn
	endpointtest.Harness
	kicks atomic.Int32
}

func newOps(t *testing.T) *ops {
	t.Helper()
	o := &ops{pool: newPool(t), nc: testutil.NATS(t).Connect(t)}
	clock := func() time.Time { return t0 }
	o.Harness = endpointtest.Serve(o.pool, clock, node.Endpoints(node.Deps{DB: o.pool, NATS: o.nc, Volumes: volumes.OnNode, Kick: func() { o.kicks.Add(1) }, Now: clock}))
	return o
}

var operator = endpointtest.As("u-op", api.RoleOperator, "")

// TestLogsEndpoint: node.logs refuses a bad since or limit
// (invalid_argument) and an unknown node (not_found) without asking
// anyone; a node whose hostd does not answer is unavailable; one that
// answers is asked from the injected clock's reading back, and its
// answer names the node, with an empty list rather than null.
func TestLogsEndpoint(t *testing.T) {
	o := newOps(t)
	ctx := context.Background()
	n := slicedNode(t, o.pool, "gpu-1", 1)
	logs := o.Find(t, api.EndpointNodeLogs)
	ask := func(req api.NodeLogsRequest) (*api.NodeLogsResponse, error) {
		return endpointtest.Read[api.NodeLogsResponse](ctx, logs, operator, req)
	}
	var asked atomic.Int32
	sub, err := o.nc.Subscribe(hostproto.MsgLogs.Wildcard(), func(*nats.Msg) { asked.Add(1) })
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		req  api.NodeLogsRequest
		want api.Code
	}{
		{"since not a duration", api.NodeLogsRequest{Node: "gpu-1", Since: "soon"}, api.CodeInvalidArgument},
		{"since negative", api.NodeLogsRequest{Node: "gpu-1", Since: "-5m"}, api.CodeInvalidArgument},
		{"limit negative", api.NodeLogsRequest{Node: "gpu-1", Limit: -1}, api.CodeInvalidArgument},
		{"limit over the bound", api.NodeLogsRequest{Node: "gpu-1", Limit: api.MaxNodeLogsLimit + 1}, api.CodeInvalidArgument},
		{"unknown node", api.NodeLogsRequest{Node: "gpu-nope"}, api.CodeNotFound},
	} {
		_, err := ask(tc.req)
		endpointtest.WantCode(t, tc.name, err, tc.want)
	}
	if err := o.nc.Flush(); err != nil {
		t.Fatal(err)
	}
	if got := asked.Load(); got != 0 {
		t.Errorf("nodes asked by refused requests: got %d; want 0", got)
	}
	if err := sub.Unsubscribe(); err != nil {
		t.Fatal(err)
	}

	_, err = ask(api.NodeLogsRequest{Node: "gpu-1"})
	endpointtest.WantCode(t, "no hostd", err, api.CodeUnavailable)

	seen := make(chan hostproto.HostLogsRequest, 1)
	if _, err := o.nc.Subscribe(hostproto.MsgLogs.SubjectOf(n.ID), func(m *nats.Msg) {
		var req hostproto.HostLogsRequest
		_ = json.Unmarshal(m.Data, &req)
		seen <- req
		_ = m.Respond([]byte(`{}`))
	}); err != nil {
		t.Fatal(err)
	}
	resp, err := ask(api.NodeLogsRequest{Node: "gpu-1", Since: "10m", Limit: 7})
	if err != nil {
		t.Fatal(err)
	}
	if resp.Node != n.ID || resp.Records == nil || len(resp.Records) != 0 {
		t.Errorf("answer: got node %q, records %#v; want %s and an empty list", resp.Node, resp.Records, n.ID)
	}
	if req := <-seen; !req.SinceTime.Equal(t0.Add(-10*time.Minute)) || req.Limit != 7 {
		t.Errorf("hostd was asked %+v; want since %v, limit 7", req, t0.Add(-10*time.Minute))
	}
}

// TestQuarantineEndpoints: node.quarantine refuses a bad reason before
// its transaction, and quarantining a quarantined slot is a conflict
// that writes nothing; only clearing wakes the scheduler (a slot can
// take requests again), as approving slots does.
func TestQuarantineEndpoints(t *testing.T) {
	o := newOps(t)
	ctx := context.Background()
	slicedNode(t, o.pool, "gpu-1", 2)
	quarantine := o.Find(t, api.EndpointNodeQuarantine)
	slot := 0
	q := func(reason string) error {
		_, err := endpointtest.Mutate[api.NodeDetail](ctx, o.Run, quarantine, operator,
			api.NodeQuarantineRequest{Node: "gpu-1", Slot: &slot, Reason: reason})
		return err
	}
	audits := func(action string) int {
		return storetest.Count(t, o.pool, `SELECT count(*) FROM audit_logs WHERE action = $1`, action)
	}
	endpointtest.WantCode(t, "no reason", q(" "), api.CodeInvalidArgument)
	endpointtest.WantCode(t, "control characters", q("bad\x1b[2J"), api.CodeInvalidArgument)
	if err := q("ECC errors"); err != nil {
		t.Fatal(err)
	}
	endpointtest.WantCode(t, "quarantined again", q("still bad"), api.CodeConflict)
	if n := audits("node.quarantine"); n != 1 {
		t.Errorf("quarantine audit rows: got %d; want 1", n)
	}
	if n := storetest.Count(t, o.pool, `SELECT count(*) FROM slots WHERE quarantine_reason = 'ECC errors'`); n != 1 {
		t.Errorf("slots quarantined for the first reason: got %d; want 1", n)
	}
	if k := o.kicks.Load(); k != 0 {
		t.Errorf("scheduler woken by a quarantine: %d times; want 0", k)
	}
	if _, err := endpointtest.Mutate[api.NodeDetail](ctx, o.Run, o.Find(t, api.EndpointNodeClear), operator,
		api.NodeClearRequest{Node: "gpu-1", Slot: &slot}); err != nil {
		t.Fatal(err)
	}
	if k, n := o.kicks.Load(), audits("node.clear"); k != 1 || n != 1 {
		t.Errorf("after a clear: %d wake-ups, %d audit rows; want 1 and 1", k, n)
	}
	if _, err := endpointtest.Mutate[api.NodeDetail](ctx, o.Run, o.Find(t, api.EndpointSlotsApprove), operator,
		api.SlotsApproveRequest{Node: "gpu-1"}); err != nil {
		t.Fatal(err)
	}
	if k := o.kicks.Load(); k != 2 {
		t.Errorf("wake-ups after approving slots: got %d; want 2", k)
	}
}
