package agent_test

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/json"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/gpuaas/gpuaas/controld"
	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/hostproto"
	"github.com/gpuaas/gpuaas/internal/signing"
	"github.com/gpuaas/gpuaas/internal/testutil"
)

// These tests play an attacker who can publish and subscribe on the bus
// in a node's name (another NATS connection): what the signatures and
// sequence numbers between hostd and controld must withstand even if the
// bus permissions fail.

// waitActiveNotFailed waits for an allocation to become active, failing
// at once if it fails instead.
func waitActiveNotFailed(t *testing.T, c *api.Client, id string) {
	t.Helper()
	testutil.Eventually(t, id+" to be active", func() bool {
		a, err := c.AllocGet(context.Background(), id)
		if err == nil && (a.State == api.AllocFailed || a.State == api.AllocReleased) {
			t.Fatalf("allocation %s is %s (%s); want active", id, a.State, a.Reason)
		}
		return err == nil && a.State == api.AllocActive
	})
}

// TestForgedTaskRepliesIgnored is the regression test of "fake refused
// replies on gpuaas.host.<node>.task failed 3 of 3 allocations": another
// connection answers every delivery to the node with an unsigned
// "refused", one signed by its own key, and a "refused" the node really
// signed for another delivery. controld ignores all three, keeps the task
// for the node, and the allocation becomes active once the node answers.
//
// The node is stopped while the first delivery is made, so the forged
// replies are the only ones: whichever would have come first, none may
// count. Its heartbeats are slow enough that it is not marked down
// meanwhile.
func TestForgedTaskRepliesIgnored(t *testing.T) {
	t.Parallel()
	env, admin := fleet(t, controld.HostsConfig{HeartbeatInterval: 10 * time.Second})
	host := newFakeHost()
	dir := t.TempDir()
	a := startAgent(t, env, dir, enroll(t, admin, "node-forged"), host.registry())
	nodeID := a.NodeID()
	readyNode(t, admin, nodeID)

	// A genuine signed "refused" of the node, for a delivery of the
	// attacker's (an expired envelope signed with controld's key).
	now := time.Now()
	expired, err := signing.Sign(taskKey(t, env), signing.Task{ID: "t-old", NodeID: nodeID, Type: api.TaskHealthProbe,
		IssuedAt: now.Add(-time.Hour), ExpiresAt: now.Add(-30 * time.Minute)})
	if err != nil {
		t.Fatal(err)
	}
	body, _ := json.Marshal(expired)
	captured, err := env.NC.Request(hostproto.MsgTask.SubjectOf(nodeID), body, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	a.stop()

	_, attackerKey, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	// The bus is locked down (controld/busauth): the attacker here holds
	// controld's own identity, the most a bus compromise could give.
	attacker := env.Bus.Connect(t)
	var mu sync.Mutex
	answered := 0
	_, err = attacker.Subscribe(hostproto.MsgTask.SubjectOf(nodeID), func(m *nats.Msg) {
		var delivered signing.Envelope
		var task signing.Task
		_ = json.Unmarshal(m.Data, &delivered)
		_ = json.Unmarshal(delivered.Payload, &task)
		unsigned, _ := json.Marshal(hostproto.TaskReply{Status: hostproto.TaskRefused, Reason: "forged", TaskID: task.ID, NodeID: nodeID})
		own, _ := signing.Seal(attackerKey, hostproto.TaskReply{Status: hostproto.TaskRefused, Reason: "forged", TaskID: task.ID,
			NodeID: nodeID, Delivery: hostproto.DeliveryDigest(m.Data)})
		ownBody, _ := json.Marshal(own)
		for _, b := range [][]byte{unsigned, ownBody, captured.Data} {
			_ = m.Respond(b)
		}
		mu.Lock()
		answered++
		mu.Unlock()
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := attacker.Flush(); err != nil {
		t.Fatal(err)
	}

	ctx := context.Background()
	al, err := admin.AllocCreate(ctx, api.AllocCreateRequest{SKU: "h200-slice", GPUs: 1})
	if err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, "controld to ignore the forged replies to the first delivery", func() bool {
		if got, err := admin.AllocGet(ctx, al.ID); err == nil && got.State == api.AllocFailed {
			t.Fatalf("a forged reply failed the allocation: %s", got.Reason)
		}
		return env.Server.HostRefusals().TaskReplies >= 3
	})
	if got, err := admin.AllocGet(ctx, al.ID); err != nil || got.State != api.AllocProvisioning {
		t.Fatalf("after forged replies: %+v, %v; want the allocation still provisioning", got, err)
	}

	startAgent(t, env, dir, "", host.registry())
	waitActiveNotFailed(t, admin, al.ID)
	mu.Lock()
	defer mu.Unlock()
	if answered == 0 {
		t.Fatal("the attacker answered no delivery; the test proved nothing")
	}
}

// capture records the raw messages published on a subject.
type capture struct {
	// mu protects msgs.
	mu   sync.Mutex
	msgs [][]byte
}

func captureSubject(t *testing.T, nc *nats.Conn, subject string) *capture {
	t.Helper()
	c := &capture{}
	if _, err := nc.Subscribe(subject, func(m *nats.Msg) {
		c.mu.Lock()
		c.msgs = append(c.msgs, m.Data)
		c.mu.Unlock()
	}); err != nil {
		t.Fatal(err)
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	return c
}

// first returns the first captured message for which ok holds.
func (c *capture) first(ok func(data []byte) bool) []byte {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, m := range c.msgs {
		if ok(m) {
			return m
		}
	}
	return nil
}

// opened decodes a captured signed report (unverified: the test only
// picks which one to replay).
func opened(data []byte, v any) bool {
	var env signing.Envelope
	return json.Unmarshal(data, &env) == nil && json.Unmarshal(env.Payload, v) == nil
}

// TestReplayedHeartbeatRefused is the regression test of "a replayed
// signed heartbeat kept a stopped node ready": heartbeats captured from
// the bus and re-published after the node stopped are refused, and the
// node goes down as if they were never sent.
func TestReplayedHeartbeatRefused(t *testing.T) {
	t.Parallel()
	env, admin := fleet(t, controld.HostsConfig{})
	a := startAgent(t, env, t.TempDir(), enroll(t, admin, "node-replay-hb"), newFakeHost().registry())
	nodeID := a.NodeID()
	// The bus is locked down (controld/busauth): the attacker here holds
	// controld's own identity, the most a bus compromise could give.
	attacker := env.Bus.Connect(t)
	beats := captureSubject(t, attacker, hostproto.MsgHeartbeat.SubjectOf(nodeID))
	readyNode(t, admin, nodeID)
	testutil.Eventually(t, "a captured heartbeat", func() bool { return beats.first(func([]byte) bool { return true }) != nil })
	a.stop()

	beats.mu.Lock()
	replay := append([][]byte(nil), beats.msgs...)
	beats.mu.Unlock()
	before := env.Server.HostRefusals().Reports
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		// Replay every captured heartbeat, over and over, until the test
		// ends: fresh enough (seconds old), validly signed.
		for ctx.Err() == nil {
			for _, b := range replay {
				_ = attacker.Publish(hostproto.MsgHeartbeat.SubjectOf(nodeID), b)
			}
			select {
			case <-ctx.Done():
			case <-time.After(50 * time.Millisecond):
			}
		}
	}()
	testutil.Eventually(t, "the node to go down despite the replayed heartbeats", func() bool {
		d, err := admin.NodeGet(context.Background(), nodeID)
		return err == nil && d.Node.State == api.NodeDown
	})
	if got := env.Server.HostRefusals().Reports; got <= before {
		t.Fatalf("refused reports %d, before the replay %d; want the replays counted", got, before)
	}
}

// TestReplayedProgressAndResultRefused: a progress report captured while a
// task runs and re-published is refused (the timeline gains no row), and
// a result captured and re-sent after it was applied is refused.
func TestReplayedProgressAndResultRefused(t *testing.T) {
	t.Parallel()
	env, admin := fleet(t, controld.HostsConfig{})
	host := newFakeHost()
	host.block = make(chan struct{})
	a := startAgent(t, env, t.TempDir(), enroll(t, admin, "node-replay-rep"), host.registry())
	nodeID := a.NodeID()
	readyNode(t, admin, nodeID)
	// The bus is locked down (controld/busauth): the attacker here holds
	// controld's own identity, the most a bus compromise could give.
	attacker := env.Bus.Connect(t)
	progress := captureSubject(t, attacker, hostproto.MsgProgress.SubjectOf(nodeID))
	results := captureSubject(t, attacker, hostproto.MsgResult.SubjectOf(nodeID))
	ctx := context.Background()

	al, err := admin.AllocCreate(ctx, api.AllocCreateRequest{SKU: "h200-slice", GPUs: 2})
	if err != nil {
		t.Fatal(err)
	}
	var leaseDone []byte
	var taskID string
	testutil.Eventually(t, "the provisioning task's lease/done progress", func() bool {
		leaseDone = progress.first(func(b []byte) bool {
			var p hostproto.TaskProgress
			if opened(b, &p) && p.Phase == "lease" && p.Status == api.PhaseDone {
				taskID = p.TaskID
				return true
			}
			return false
		})
		return leaseDone != nil
	})
	events := func() int {
		var n int
		if err := env.Server.Pool().QueryRow(ctx, `SELECT count(*) FROM node_task_events WHERE task_id = $1`, taskID).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	// The task waits in define_start: its progress so far is recorded.
	testutil.Eventually(t, "define_start/started recorded", func() bool { return events() == 3 })
	before := env.Server.HostRefusals().Reports
	if err := attacker.Publish(hostproto.MsgProgress.SubjectOf(nodeID), leaseDone); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, "the replayed progress to be refused", func() bool { return env.Server.HostRefusals().Reports > before })
	if n := events(); n != 3 {
		t.Fatalf("timeline has %d events after the replay; want 3", n)
	}

	close(host.block)
	waitActiveNotFailed(t, admin, al.ID)
	var result []byte
	testutil.Eventually(t, "a captured result", func() bool {
		result = results.first(func(b []byte) bool {
			var r hostproto.TaskResult
			return opened(b, &r) && r.TaskID == taskID
		})
		return result != nil
	})
	// Asked on the node's own inbox, where controld answers the node's
	// reports: the replay is refused for what it is, not for its reply.
	asNode := env.Bus.Connect(t, nats.CustomInboxPrefix(api.InboxPrefix(nodeID)))
	m, err := asNode.Request(hostproto.MsgResult.SubjectOf(nodeID), result, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if code := m.Header.Get("Nats-Service-Error-Code"); code != string(api.CodeUnauthenticated) {
		t.Fatalf("replayed result answered %q (%s); want unauthenticated", code, m.Data)
	}
	if refused := env.Server.HostRefusals(); refused.TaskReplies != 0 {
		t.Fatalf("%d genuine task replies were refused; want none", refused.TaskReplies)
	}
}
