package agent_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gpuaas/gpuaas/controld"
	"github.com/gpuaas/gpuaas/hostd/agent"
	"github.com/gpuaas/gpuaas/hostd/tasks"
	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/hostproto"
	"github.com/gpuaas/gpuaas/internal/signing"
	"github.com/gpuaas/gpuaas/internal/testutil"
)

func TestEnrollmentTokenIsSingleUse(t *testing.T) {
	t.Parallel()
	env, admin := fleet(t, controld.HostsConfig{})
	host := newFakeHost()
	tok := enroll(t, admin, "node-a")
	dir := t.TempDir()
	a := startAgent(t, env, dir, tok, host.registry())
	readyNode(t, admin, a.NodeID())

	info, err := os.Stat(filepath.Join(dir, "identity.json"))
	if err != nil || info.Mode().Perm() != 0o600 {
		t.Fatalf("identity file: %v, mode %v; want 0600", err, info.Mode().Perm())
	}
	for _, tt := range []struct{ name, token, want string }{
		{"reused token", tok, "already used"},
		{"unknown token", "gpe_nope", "unknown enrollment token"},
		{"no token", "", "not enrolled"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			b, err := agent.New(agent.Config{Server: env.NATSURL, StateDir: t.TempDir(), Token: tt.token,
				Env: &tasks.Env{}, Handlers: host.registry()})
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			if err := b.Run(ctx); err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("got %v; want an error saying %q", err, tt.want)
			}
		})
	}
	// A restarted agent keeps its identity and needs no token.
	a.stop()
	b := startAgent(t, env, dir, "", host.registry())
	if b.NodeID() != a.NodeID() {
		t.Fatalf("restarted as %s; want %s", b.NodeID(), a.NodeID())
	}
}

func TestProvisionAndReleaseThroughAgent(t *testing.T) {
	t.Parallel()
	env, admin := fleet(t, controld.HostsConfig{})
	host := newFakeHost()
	a := startAgent(t, env, t.TempDir(), enroll(t, admin, "node-b"), host.registry())
	readyNode(t, admin, a.NodeID())
	ctx := context.Background()

	al, err := admin.AllocCreate(ctx, api.AllocCreateRequest{SKU: "h200-slice", GPUs: 2})
	if err != nil {
		t.Fatal(err)
	}
	got := waitAlloc(t, admin, al.ID, api.AllocActive)
	phases := map[string]bool{}
	for _, p := range got.Timeline {
		phases[p.Phase+"/"+p.Status] = true
	}
	for _, want := range []string{"lease/done", "define_start/done"} {
		if !phases[want] {
			t.Errorf("timeline %+v lacks %s", got.Timeline, want)
		}
	}
	if _, err := admin.AllocRelease(ctx, api.AllocReleaseRequest{ID: al.ID}); err != nil {
		t.Fatal(err)
	}
	waitAlloc(t, admin, al.ID, api.AllocReleased)
	d, err := admin.NodeGet(ctx, a.NodeID())
	if err != nil || d.Node.SlotsFree != 8 {
		t.Fatalf("after release: %v, %d free slots; want 8", err, d.Node.SlotsFree)
	}
	if n := host.count(api.TaskVMProvision); n != 1 {
		t.Fatalf("provision ran %d times; want 1", n)
	}
}

// TestEnvelopesRefused delivers forged and stale envelopes straight to the
// node: each is refused and nothing runs; a genuine one runs once however
// often it is delivered.
func TestEnvelopesRefused(t *testing.T) {
	t.Parallel()
	env, admin := fleet(t, controld.HostsConfig{})
	host := newFakeHost()
	a := startAgent(t, env, t.TempDir(), enroll(t, admin, "node-c"), host.registry())
	readyNode(t, admin, a.NodeID())
	key := taskKey(t, env)
	now := time.Now()
	base := signing.Task{ID: "t-forged", NodeID: a.NodeID(), Type: api.TaskHealthProbe, Params: json.RawMessage(`{}`),
		IssuedAt: now, ExpiresAt: now.Add(time.Minute)}
	seal := func(tk signing.Task) signing.Envelope {
		e, err := signing.Sign(key, tk)
		if err != nil {
			t.Fatal(err)
		}
		return e
	}
	nodeKey := nodePublicKey(t, env, a.NodeID())
	deliver := func(e signing.Envelope) hostproto.TaskReply {
		b, _ := json.Marshal(e)
		m, err := env.NC.Request(hostproto.MsgTask.SubjectOf(a.NodeID()), b, 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		// Every answer, refusals included, is the node's, signed, for
		// this delivery.
		var sealed signing.Envelope
		var r hostproto.TaskReply
		if err := json.Unmarshal(m.Data, &sealed); err != nil {
			t.Fatal(err)
		}
		if err := signing.Open(nodeKey, sealed, &r); err != nil {
			t.Fatalf("reply not signed by the node: %v", err)
		}
		if r.NodeID != a.NodeID() || !bytes.Equal(r.Delivery, hostproto.DeliveryDigest(b)) {
			t.Fatalf("reply %+v does not name this node and delivery", r)
		}
		return r
	}
	before := host.count(api.TaskHealthProbe)

	tampered := seal(base)
	tampered.Payload = []byte(strings.Replace(string(tampered.Payload), `"params":{}`, `"params":{"x":1}`, 1))
	wrongNode := base
	wrongNode.NodeID = "n-someoneelse"
	expired := base
	expired.IssuedAt, expired.ExpiresAt = now.Add(-time.Hour), now.Add(-10*time.Minute)
	otherKey := seal(base)
	otherKey.Signature[0] ^= 0xff

	for _, tt := range []struct {
		name string
		env  signing.Envelope
		want string
	}{
		{"tampered params", tampered, "bad signature"},
		{"wrong node", seal(wrongNode), "another node"},
		{"expired", seal(expired), "expired"},
		{"bad signature", otherKey, "bad signature"},
	} {
		r := deliver(tt.env)
		if r.Status != hostproto.TaskRefused || !strings.Contains(r.Reason, tt.want) {
			t.Errorf("%s: got %+v; want refused (%s)", tt.name, r, tt.want)
		}
	}
	good := seal(base)
	if r := deliver(good); r.Status != hostproto.TaskAccepted {
		t.Fatalf("genuine envelope: got %+v; want accepted", r)
	}
	if r := deliver(good); r.Status != hostproto.TaskDuplicate {
		t.Fatalf("replayed envelope: got %+v; want duplicate (not run)", r)
	}
	testutil.Eventually(t, "the genuine task to run", func() bool { return host.count(api.TaskHealthProbe) == before+1 })
	// A restart keeps the seen-set: the replay is still not run.
	a.stop()
	b := startAgent(t, env, filepathOf(t, a), "", host.registry())
	if r := deliver(good); r.Status != hostproto.TaskDuplicate {
		t.Fatalf("replay after restart: got %+v; want duplicate", r)
	}
	_ = b
	if got := host.count(api.TaskHealthProbe); got != before+1 {
		t.Fatalf("health probe ran %d times; want %d", got, before+1)
	}
}

// TestInterruptedProvisionFailsAndCleansUp stops hostd in the middle of a
// provisioning phase that outlasts its drain deadline and starts it again:
// the task is reported interrupted, the allocation fails, the cleanup runs
// and the slots come back — nothing stays provisioning, nothing is lost.
func TestInterruptedProvisionFailsAndCleansUp(t *testing.T) {
	t.Parallel()
	env, admin := fleet(t, controld.HostsConfig{})
	host := newFakeHost()
	host.block = make(chan struct{})
	dir := t.TempDir()
	a := startAgent(t, env, dir, enroll(t, admin, "node-d"), host.registry(),
		func(c *agent.Config) { c.DrainTimeout = 100 * time.Millisecond })
	readyNode(t, admin, a.NodeID())
	ctx := context.Background()
	al, err := admin.AllocCreate(ctx, api.AllocCreateRequest{SKU: "h200-slice", GPUs: 4})
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
	a.stop()
	startAgent(t, env, dir, "", host.registry())
	failed := waitAlloc(t, admin, al.ID, api.AllocFailed)
	if !strings.Contains(failed.Reason, "define_start") {
		t.Errorf("reason %q does not name the interrupted phase", failed.Reason)
	}
	testutil.Eventually(t, "cleanup to free the slots", func() bool {
		d, err := admin.NodeGet(ctx, a.NodeID())
		return err == nil && d.Node.SlotsFree == 8
	})
	if host.count(api.TaskVMRelease) != 1 {
		t.Fatalf("cleanup ran %d times; want 1", host.count(api.TaskVMRelease))
	}
}

// TestSilentNodeGoesDownAndTasksExpire: a node that stops sending
// heartbeats is marked down, and an allocation waiting on it fails at the
// task deadline instead of staying provisioning forever.
func TestSilentNodeGoesDownAndTasksExpire(t *testing.T) {
	t.Parallel()
	env, admin := fleet(t, controld.HostsConfig{TaskDeadline: 3 * time.Second})
	host := newFakeHost()
	a := startAgent(t, env, t.TempDir(), enroll(t, admin, "node-e"), host.registry())
	readyNode(t, admin, a.NodeID())
	a.stop()
	ctx := context.Background()
	testutil.Eventually(t, "node down", func() bool {
		d, err := admin.NodeGet(ctx, a.NodeID())
		return err == nil && d.Node.State == api.NodeDown
	})
	// Down nodes take no placements.
	if _, err := admin.AllocCreate(ctx, api.AllocCreateRequest{SKU: "h200-slice", GPUs: 1}); !errors.Is(err, api.ErrNoCapacity) {
		t.Fatalf("placement on a down node: got %v; want no_capacity", err)
	}
	// Had the node died just after a placement, its task would find no
	// taker: the allocation fails at the deadline.
	if _, err := env.Server.Pool().Exec(ctx, `UPDATE nodes SET state = 'ready', last_heartbeat_at = now() WHERE id = $1`, a.NodeID()); err != nil {
		t.Fatal(err)
	}
	al, err := admin.AllocCreate(ctx, api.AllocCreateRequest{SKU: "h200-slice", GPUs: 1})
	if err != nil {
		t.Fatal(err)
	}
	failed := waitAlloc(t, admin, al.ID, api.AllocFailed)
	if !strings.Contains(failed.Reason, "no node took the task") {
		t.Fatalf("reason %q; want it to say no node took the task", failed.Reason)
	}
}

func filepathOf(t *testing.T, a *runningAgent) string {
	t.Helper()
	return a.StateDir()
}
