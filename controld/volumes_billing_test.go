package controld_test

import (
	"crypto/ed25519"
	"crypto/rand"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/nats-io/nats.go"

	"github.com/gpuaas/gpuaas/controld"
	"github.com/gpuaas/gpuaas/controld/alloc"
	"github.com/gpuaas/gpuaas/controld/tasks"
	"github.com/gpuaas/gpuaas/controld/volumes"
	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/hostproto"
	"github.com/gpuaas/gpuaas/internal/signing"
)

// settleVolumeAt is settleVolume on the billing clock (the meter starts
// when the node made the volume).
func (e *billingEnv) settleVolumeAt(t *testing.T, v *api.Volume, typ string) {
	t.Helper()
	ctx := t.Context()
	pool := e.Server.Pool()
	var taskID, nodeID string
	if err := pool.QueryRow(ctx, `SELECT task_id, node_id FROM volumes WHERE id = $1`, v.ID).Scan(&taskID, &nodeID); err != nil {
		t.Fatal(err)
	}
	raw, _ := json.Marshal(hostproto.VolumeTaskResult{VolumeID: v.ID, SizeBytes: v.SizeBytes})
	if err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		_, err := volumes.Settlers()[typ](ctx, tx, tasks.Outcome{TaskID: taskID, NodeID: nodeID, Type: typ, Now: e.clock.Now(),
			Result: hostproto.TaskResult{NodeID: nodeID, TaskID: taskID, Status: hostproto.TaskSucceeded, Result: raw}})
		return err
	}); err != nil {
		t.Fatal(err)
	}
}

// TestDepletedProjectKeepsVolumes: when a project's balance runs out and
// its grace period ends, the allocation a volume is attached to is
// released and the volume detached, never deleted; the volume is still
// charged (the balance goes below zero); a new allocation with the
// volume is refused with insufficient_funds, changing nothing, until the
// project is topped up.
func TestDepletedProjectKeepsVolumes(t *testing.T) {
	t.Parallel()
	grace := 3 * time.Minute
	e := startBilling(t, controld.BillingConfig{Window: time.Minute, Grace: grace})
	ctx := t.Context()
	c := e.Client(e.AdminToken)
	// 8 × 220 = 1760/h and 1000 GiB at $0.10/GiB-month (13/h): the
	// volume's create needs 10 minutes of its 14/h (13.7 rounded up), 3,
	// and the allocation's 10 minutes of both, 296.
	e.credit(t, 300)
	v, err := c.VolumeCreate(ctx, api.VolumeCreateRequest{Name: "data", Size: "1000G", Node: "sim-h100-1"})
	if err != nil {
		t.Fatal(err)
	}
	e.settleVolumeAt(t, v, api.TaskVolumeCreate)
	withVolume := api.AllocCreateRequest{SKU: "h100-baremetal", GPUs: 8, Volumes: []api.VolumeMount{{Volume: "data"}}}
	a, err := c.AllocCreate(ctx, withVolume)
	if err != nil {
		t.Fatal(err)
	}
	if err := pgx.BeginFunc(ctx, e.Server.Pool(), func(tx pgx.Tx) error {
		_, err := alloc.ProvisionDone(ctx, tx, a.ID, hostproto.TaskSucceeded, "", e.clock.Now())
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if got, err := c.VolumeGet(ctx, api.VolumeRef{Volume: "data"}); err != nil || got.State != api.VolumeAttached {
		t.Fatalf("volume %+v, %v; want attached", got, err)
	}
	released := false
	for range 40 {
		e.clock.Advance(time.Minute)
		if res := e.tick(t); res.Released > 0 {
			released = true
			break
		}
	}
	if !released {
		t.Fatal("the depleted project's allocation was never released")
	}
	settleRelease(t, e.Env, a.ID)
	got, err := c.VolumeGet(ctx, api.VolumeRef{Volume: "data"})
	if err != nil || got.State != api.VolumeReady || got.AllocationID != "" {
		t.Fatalf("volume after the depleted release: %+v, %v; want ready (detached, kept)", got, err)
	}
	before, err := c.BillingBalance(ctx, api.BillingRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if before.RunningVolumes != 1 || before.RunningAllocations != 0 || before.BurnRateMinorPerHour != 13 {
		t.Fatalf("balance %+v; want the volume still charged (13/h) and no allocation", before)
	}
	allocs := count(t, e.Env, `SELECT count(*) FROM allocations`)
	_, err = c.AllocCreate(ctx, withVolume)
	if !errors.Is(err, api.ErrInsufficientFunds) {
		t.Fatalf("a new allocation with the volume of a depleted project: %v; want insufficient_funds", err)
	}
	if n := count(t, e.Env, `SELECT count(*) FROM allocations`); n != allocs {
		t.Fatalf("the refused create left %d allocations; want %d", n, allocs)
	}
	if got, _ := c.VolumeGet(ctx, api.VolumeRef{Volume: "data"}); got.State != api.VolumeReady {
		t.Fatalf("volume after the refusal: %s; want ready", got.State)
	}
	// An hour on, the volume is still there and still charged: the
	// balance keeps going down.
	for range 60 {
		e.clock.Advance(time.Minute)
		e.tick(t)
	}
	after, err := c.BillingBalance(ctx, api.BillingRequest{})
	if err != nil || after.BalanceMinor >= before.BalanceMinor {
		t.Fatalf("balance an hour later %+v, %v; want below %d", after, err, before.BalanceMinor)
	}
	if got, _ := c.VolumeGet(ctx, api.VolumeRef{Volume: "data"}); got.State != api.VolumeReady {
		t.Fatalf("volume an hour into depletion: %s; want ready", got.State)
	}
	e.credit(t, 1000-after.BalanceMinor)
	b, err := c.AllocCreate(ctx, withVolume)
	if err != nil || !strings.HasPrefix(b.ID, "a-") {
		t.Fatalf("a new allocation with the volume once funded: %+v, %v", b, err)
	}
}

// TestHeartbeatWithoutVolumeFailsIt: a node's signed heartbeat whose
// health lists its volumes, without one it should hold, fails that volume
// (with the reason), stops charging it and tells the project (its event
// in the outbox); the balance's storage burn goes to zero.
func TestHeartbeatWithoutVolumeFailsIt(t *testing.T) {
	t.Parallel()
	e := startBilling(t, controld.BillingConfig{Window: time.Minute})
	ctx := t.Context()
	c := e.Client(e.AdminToken)
	e.credit(t, 3)
	v, err := c.VolumeCreate(ctx, api.VolumeCreateRequest{Name: "data", Size: "1000G", Node: "sim-h100-1"})
	if err != nil {
		t.Fatal(err)
	}
	e.settleVolumeAt(t, v, api.TaskVolumeCreate)
	pub, key, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.Server.Pool().Exec(ctx, `UPDATE nodes SET public_key = $2 WHERE id = $1`, v.NodeID, []byte(pub)); err != nil {
		t.Fatal(err)
	}
	nc := e.Bus.Connect(t, nats.CustomInboxPrefix(api.InboxPrefix(v.NodeID)))
	var seq uint64
	heartbeat := func(health string) {
		t.Helper()
		e.clock.Advance(5 * time.Minute)
		seq++
		hb := hostproto.Heartbeat{NodeID: v.NodeID, At: e.clock.Now(), Health: json.RawMessage(health)}
		hb.ReportStamp = hostproto.ReportStamp{Kind: hostproto.HostHeartbeat, Seq: seq, SentAt: e.clock.Now()}
		env, err := signing.Seal(key, hb)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := json.Marshal(env)
		reply, err := nc.Request(hostproto.MsgHeartbeat.SubjectOf(v.NodeID), body, 10*time.Second)
		if err != nil || !strings.Contains(string(reply.Data), `"ok":true`) {
			t.Fatalf("heartbeat: %v %s; want acknowledged", err, reply.Data)
		}
	}
	heartbeat(`{"volume_free_bytes": 1000000000000, "volumes": ["` + v.ID + `"]}`)
	if got, _ := c.VolumeGet(ctx, api.VolumeRef{Volume: "data"}); got.State != api.VolumeReady {
		t.Fatalf("volume after a heartbeat listing it: %s; want ready", got.State)
	}
	events := count(t, e.Env, `SELECT count(*) FROM outbox_events WHERE kind = $1 AND subject = $2`, api.EventVolume, v.ID)
	heartbeat(`{"volume_free_bytes": 1000000000000, "volumes": []}`)
	got, err := c.VolumeGet(ctx, api.VolumeRef{Volume: "data"})
	if err != nil || got.State != api.VolumeFailed || !strings.Contains(got.Reason, "reported it missing") {
		t.Fatalf("volume after a heartbeat without it: %+v, %v; want failed, saying why", got, err)
	}
	if n := count(t, e.Env, `SELECT count(*) FROM outbox_events WHERE kind = $1 AND subject = $2`, api.EventVolume, v.ID); n != events+1 {
		t.Errorf("volume events %d; want one more than %d", n, events)
	}
	bal, err := c.BillingBalance(ctx, api.BillingRequest{})
	if err != nil || bal.RunningVolumes != 0 || bal.StorageBurnMinorPerHour != 0 {
		t.Fatalf("balance %+v, %v; want the lost volume no longer charged", bal, err)
	}
}
