package hosts

import (
	"crypto/ed25519"
	"crypto/rand"
	"encoding/json"
	"testing"

	"github.com/gpuaas/gpuaas/internal/hostproto"
	"github.com/gpuaas/gpuaas/internal/signing"
)

// BenchmarkTaskReply is what signing a task reply adds per delivery: hostd
// seals the reply (Ed25519 sign + JSON), controld opens it (Ed25519
// verify + JSON) and checks task, node and delivery digest.
func BenchmarkTaskReply(b *testing.B) {
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		b.Fatal(err)
	}
	body := []byte(`{"payload":"eyJ0YXNrX2lkIjoidC0xIn0=","signature":"AAAA"}`)
	digest := hostproto.DeliveryDigest(body)
	b.Run("seal", func(b *testing.B) {
		for b.Loop() {
			env, err := signing.Seal(priv, hostproto.TaskReply{Status: hostproto.TaskAccepted, TaskID: "t-1", NodeID: "n-1", Delivery: hostproto.DeliveryDigest(body)})
			if err != nil {
				b.Fatal(err)
			}
			if _, err := json.Marshal(env); err != nil {
				b.Fatal(err)
			}
		}
	})
	env, _ := signing.Seal(priv, hostproto.TaskReply{Status: hostproto.TaskAccepted, TaskID: "t-1", NodeID: "n-1", Delivery: digest})
	data, _ := json.Marshal(env)
	b.Run("open", func(b *testing.B) {
		for b.Loop() {
			var e signing.Envelope
			var r hostproto.TaskReply
			if json.Unmarshal(data, &e) != nil || signing.Open(pub, e, &r) != nil || r.TaskID != "t-1" || string(r.Delivery) != string(digest) {
				b.Fatal("reply does not open")
			}
		}
	})
}

// BenchmarkSeqWindow is the anti-replay window's work per report, without
// the Postgres round trip that stores it.
func BenchmarkSeqWindow(b *testing.B) {
	var w seqWindow
	seq := uint64(1_800_000_000_000_000_000)
	for b.Loop() {
		seq += 2
		w.accept(seq)
		w.accept(seq - 1) // one late arrival per report
	}
}
