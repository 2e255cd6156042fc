package hosts

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"encoding/json"
	"errors"
	"log/slog"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/gpuaas/gpuaas/controld/store"
	"github.com/gpuaas/gpuaas/controld/tasks"
	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/hostproto"
	"github.com/gpuaas/gpuaas/internal/signing"
	"github.com/gpuaas/gpuaas/internal/testutil"
)

// reportKinds are the node reports checkReport opens, in the order the
// fuzz input's kind byte picks them.
var reportKinds = []struct {
	kind  string
	check func(ctx context.Context, d *Service, m *nats.Msg) (string, report, error)
}{
	{hostproto.HostHeartbeat, checkAs(hostproto.MsgHeartbeat, func() sealedReport[hostproto.Heartbeat] { return new(heartbeat) })},
	{hostproto.HostProgress, checkAs(hostproto.MsgProgress, func() sealedReport[hostproto.TaskProgress] { return new(progress) })},
	{hostproto.HostResult, checkAs(hostproto.MsgResult, func() sealedReport[hostproto.TaskResult] { return new(result) })},
	{hostproto.HostPull, checkAs(hostproto.MsgPull, func() sealedReport[hostproto.PullRequest] { return new(pull) })},
	{hostproto.HostFault, checkAs(hostproto.MsgFault, func() sealedReport[hostproto.GPUFault] { return new(gpuFault) })},
}

// checkAs checks a message m as it arrives, decoded the way ServeSealed
// decodes it, as a report of m's type.
func checkAs[R, Resp any](m hostproto.Message[R, Resp], mk func() sealedReport[R]) func(context.Context, *Service, *nats.Msg) (string, report, error) {
	return func(ctx context.Context, d *Service, msg *nats.Msg) (string, report, error) {
		v := mk()
		nodeID, err := checkReport(ctx, d, m.InboundSealed(msg), v)
		return nodeID, v, err
	}
}

// replyOf decodes a task reply as Delivery.Next does.
func replyOf(data []byte) (hostproto.Sealed[hostproto.TaskReply], error) {
	var env hostproto.Sealed[hostproto.TaskReply]
	return env, json.Unmarshal(data, &env)
}

// FuzzNodeMessages feeds controld's checks of what a node sends — its
// reports and its replies to task deliveries — against a real Postgres
// (the replay window is stored there). Each input is a message as it
// arrives (msg) and a payload the node's key signs (payload), checked as
// a report of the kind the kind byte picks and as a task reply.
// Properties: an accepted report is from the node its subject names, of the
// subject's kind, sent within ReportMaxAge, and its sequence number is
// new: never zero, never one accepted before, never below the window; an
// accepted reply names the task, the node and the very delivery it
// answers; a refused report is unauthenticated or invalid_argument.
func FuzzNodeMessages(f *testing.F) {
	ctx := context.Background()
	pool, err := store.Open(ctx, testutil.Postgres(f, pgTemplate), 2)
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(pool.Close)
	now := time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)
	const nodeID = "n-fuzz0node0001" // fixed: the kept inputs are signed for it
	if _, err := pool.Exec(ctx, `INSERT INTO nodes (id, name, shape, gpu_model, state, created_at, updated_at)
		VALUES ($1, 'node-1', 'gpu_slice', 'H200', 'ready', $2, $2)`, nodeID, now); err != nil {
		f.Fatal(err)
	}
	nodeKey := ed25519.NewKeyFromSeed(bytes.Repeat([]byte{9}, ed25519.SeedSize))
	d := &Service{
		cfg:  Config{Pool: pool, Tuning: Tuning{ReportMaxAge: 2 * time.Minute}, Now: func() time.Time { return now }, Log: slog.New(slog.DiscardHandler)},
		keys: map[string]ed25519.PublicKey{nodeID: nodeKey.Public().(ed25519.PublicKey)},
		seqs: map[string]storedWindow{},
	}
	claimed := tasks.Claimed{ID: "t-1", NodeID: nodeID}
	delivery := []byte(`{"payload":"e30=","signature":"AAAA"}`)
	digest := hostproto.DeliveryDigest(delivery)

	stamp := func(kind string, seq uint64) hostproto.ReportStamp {
		return hostproto.ReportStamp{Kind: kind, Seq: seq, SentAt: now.Add(-time.Second)}
	}
	seeds := []struct {
		kind uint8
		v    any
	}{
		{0, hostproto.Heartbeat{ReportStamp: stamp(hostproto.HostHeartbeat, 1), NodeID: nodeID, At: now, TerminalAddr: "10.0.0.5:2222",
			GPUActive: map[string]time.Time{"0000:3b:00.0": now}}},
		{1, hostproto.TaskProgress{ReportStamp: stamp(hostproto.HostProgress, 2), NodeID: nodeID, TaskID: "t-1", Phase: "seed", Status: api.PhaseDone}},
		{2, hostproto.TaskResult{ReportStamp: stamp(hostproto.HostResult, 3), NodeID: nodeID, TaskID: "t-1", Status: hostproto.TaskSucceeded, Result: json.RawMessage(`{"ok":true}`)}},
		{3, hostproto.PullRequest{ReportStamp: stamp(hostproto.HostPull, 300), NodeID: nodeID, At: now}},
		{4, hostproto.GPUFault{ReportStamp: stamp(hostproto.HostFault, 4), NodeID: nodeID, GPU: "0000:3b:00.0", XID: 79, At: now}},
		{2, hostproto.TaskReply{Status: hostproto.TaskAccepted, TaskID: "t-1", NodeID: nodeID, Delivery: digest}},
	}
	for _, s := range seeds {
		payload, err := json.Marshal(s.v)
		if err != nil {
			f.Fatal(err)
		}
		env, err := signing.Seal(nodeKey, json.RawMessage(payload))
		if err != nil {
			f.Fatal(err)
		}
		msg, err := json.Marshal(env)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(s.kind, msg, payload)
	}

	// The target's accepting path works: a heartbeat as hostd sends it.
	hb, err := signing.Seal(nodeKey, hostproto.Heartbeat{ReportStamp: stamp(hostproto.HostHeartbeat, 5), NodeID: nodeID, At: now})
	if err != nil {
		f.Fatal(err)
	}
	hbMsg, _ := json.Marshal(hb)
	if _, err := checkReport(ctx, d, hostproto.MsgHeartbeat.InboundSealed(&nats.Msg{Subject: hostproto.MsgHeartbeat.SubjectOf(nodeID), Data: hbMsg}), new(heartbeat)); err != nil {
		f.Fatalf("hostd's own heartbeat: %v", err)
	}
	accepted := map[uint64]bool{5: true} // sequence numbers of accepted reports, within the window
	highest := uint64(5)
	f.Fuzz(func(t *testing.T, kind uint8, msg, payload []byte) {
		rk := reportKinds[int(kind)%len(reportKinds)]
		subject := "gpuaas.ctl.host." + nodeID + "." + rk.kind // every kind, as a forger would
		env, err := signing.Seal(nodeKey, json.RawMessage(payload))
		if err != nil {
			return // not JSON: the node would not have sent it
		}
		fresh, err := json.Marshal(env)
		if err != nil {
			t.Fatal(err)
		}
		for _, data := range [][]byte{msg, fresh} {
			got, v, err := rk.check(context.Background(), d, &nats.Msg{Subject: subject, Data: data})
			if err != nil {
				var apiErr *api.Error
				if got != "" || !errors.As(err, &apiErr) || (apiErr.Code != api.CodeUnauthenticated && apiErr.Code != api.CodeInvalidArgument) {
					t.Fatalf("checkReport: got %q and %v", got, err)
				}
			} else {
				st := v.Stamp()
				age := now.Sub(st.SentAt)
				if got != nodeID || v.node() != nodeID || st.Kind != rk.kind || age > d.cfg.ReportMaxAge || age < -d.cfg.ReportMaxAge {
					t.Fatalf("accepted %+v as a %s report of %s", v, rk.kind, got)
				}
				if st.Seq == 0 || accepted[st.Seq] || st.Seq+replayWindow <= highest {
					t.Fatalf("accepted sequence number %d (highest %d, seen before: %v)", st.Seq, highest, accepted[st.Seq])
				}
				accepted[st.Seq] = true
				if st.Seq > highest {
					highest = st.Seq
					for seq := range accepted {
						if seq+replayWindow <= highest {
							delete(accepted, seq) // below the window: refused by that rule
						}
					}
				}
			}

			sealed, bad := replyOf(data)
			reply, err := d.openReply(context.Background(), claimed, digest, sealed, bad)
			if err != nil {
				if reply.Status != "" || reply.TaskID != "" || reply.NodeID != "" || reply.Delivery != nil {
					t.Fatalf("openReply: got %+v and %v", reply, err)
				}
				continue
			}
			if reply.NodeID != nodeID || reply.TaskID != claimed.ID || !bytes.Equal(reply.Delivery, digest) {
				t.Fatalf("accepted reply %+v for another task, node or delivery", reply)
			}
		}
	})
}
