package agent

import (
	"crypto/ed25519"
	"fmt"
	"io"
	"log/slog"
	"os"
	"testing"
	"time"

	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/hostproto"
	"github.com/gpuaas/gpuaas/internal/signing"
)

// BenchmarkAdmit is hostd's share of the answer to a delivery, without
// NATS: verifying the envelope and recording the task id — in memory
// (admit, as now), or then also writing the accepted record durably
// under the lock, as admit did before docs/decisions/0043-task-path.md
// ("durable-record"), which is what any task type that changes the
// host still pays before its handler runs (persistAccepted).
func BenchmarkAdmit(b *testing.B) {
	pub, priv, err := ed25519.GenerateKey(nil)
	if err != nil {
		b.Fatal(err)
	}
	dir := b.TempDir()
	if err := os.MkdirAll(tasksDir(dir), 0o700); err != nil {
		b.Fatal(err)
	}
	a := &Agent{cfg: Config{StateDir: dir, Log: slog.New(slog.NewTextHandler(io.Discard, nil)), Now: time.Now},
		records: map[string]*record{}, id: &identity{NodeID: "n-bench"}}
	a.verifier = &signing.Verifier{Keys: []ed25519.PublicKey{pub}, NodeID: "n-bench", Now: time.Now}
	for _, durable := range []bool{false, true} {
		name := "memory"
		if durable {
			name = "durable-record"
		}
		b.Run(name, func(b *testing.B) {
			clear(a.records)
			envs := make([]signing.Envelope, b.N)
			now := time.Now()
			for i := range envs {
				var err error
				if envs[i], err = signing.Sign(priv, signing.Task{ID: fmt.Sprintf("t-%d", i), NodeID: "n-bench",
					Type: api.TaskVMRelease, IssuedAt: now, ExpiresAt: now.Add(time.Hour)}); err != nil {
					b.Fatal(err)
				}
			}
			b.ResetTimer()
			for i := range b.N {
				t, reply, run := a.admit(envs[i])
				if reply.Status != hostproto.TaskAccepted || !run {
					b.Fatalf("admit: %+v", reply)
				}
				if durable {
					a.mu.Lock()
					err := saveRecord(dir, a.records[t.ID], true)
					a.mu.Unlock()
					if err != nil {
						b.Fatal(err)
					}
				}
				a.running.Done()
			}
		})
	}
}
