package signing

import (
	"bytes"
	"crypto/ed25519"
	"encoding/json"
	"errors"
	"testing"
	"time"
)

// fuzzKey is fixed so that the envelopes kept in testdata/fuzz stay
// signed by the key the target trusts.
var fuzzKey = ed25519.NewKeyFromSeed(bytes.Repeat([]byte{7}, ed25519.SeedSize))

var fuzzNow = time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)

// fuzzTasks are the tasks the fuzz target signs for its seeds: the only
// payloads a signature check may ever accept from it.
func fuzzTasks() []Task {
	return []Task{
		{ID: "t-1", NodeID: "n-1", Type: "diag.health_probe", Params: json.RawMessage(`{"x":1}`),
			IssuedAt: fuzzNow.Add(-time.Second), ExpiresAt: fuzzNow.Add(time.Minute), Corr: "c-1"},
		{ID: "t-2", NodeID: "n-1", Type: "slice.vm_provision",
			Params:   json.RawMessage(`{"allocation_id":"a-1","posix_user":"u1","slots":[{"gpu_pci":"0000:3b:00.0"}],"ssh_keys":["ssh-ed25519 AAAA x"]}`),
			IssuedAt: fuzzNow.Add(-time.Minute), ExpiresAt: fuzzNow.Add(4 * time.Minute)},
		{ID: "t-3", NodeID: "n-2", Type: "diag.health_probe", IssuedAt: fuzzNow, ExpiresAt: fuzzNow.Add(time.Minute)},
	}
}

// FuzzVerify feeds hostd's task path a delivery (msg: the NATS message's
// bytes, decoded and verified as the agent does) and controld's key a
// payload to sign. Properties: an envelope the key did not sign as it is
// is never accepted (a mutated seed, payload or signature, is refused);
// Verify and Open return a task or an error wrapping ErrRefused, never
// both; an accepted task is for this node, inside its window, and
// survives Sign → Verify unchanged.
func FuzzVerify(f *testing.F) {
	signed := map[string][]byte{} // payload → signature
	for _, task := range fuzzTasks() {
		env, err := Sign(fuzzKey, task)
		if err != nil {
			f.Fatal(err)
		}
		signed[string(env.Payload)] = env.Signature
		msg, err := json.Marshal(env)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(msg, env.Payload)
	}
	f.Add([]byte(`{"payload":"","signature":null}`), []byte(`{"task_id":"t","type":"x","node_id":"n-1","expires_at":"2026-11-22T12:00:01Z","issued_at":"0001-01-01T00:00:00Z"}`))
	f.Add([]byte(`null`), []byte(`{"task_id":"t","type":"x","node_id":"n-1","expires_at":"2026-11-22T12:00:00Z"}`))
	pub := fuzzKey.Public().(ed25519.PublicKey)
	v := &Verifier{Keys: []ed25519.PublicKey{pub}, NodeID: "n-1", Skew: 5 * time.Second, Now: func() time.Time { return fuzzNow }}

	f.Fuzz(func(t *testing.T, msg, payload []byte) {
		// A delivery as the agent reads it.
		var env Envelope
		if json.Unmarshal(msg, &env) == nil {
			task, err := v.Verify(env)
			checkVerdict(t, task, err)
			if err == nil {
				if sig, ok := signed[string(env.Payload)]; !ok || !bytes.Equal(sig, env.Signature) {
					t.Fatalf("accepted an envelope the key did not sign: %q", env.Payload)
				}
			}
			var opened Task
			if err := Open(pub, env, &opened); err == nil {
				if sig, ok := signed[string(env.Payload)]; !ok || !bytes.Equal(sig, env.Signature) {
					t.Fatalf("opened an envelope the key did not sign: %q", env.Payload)
				}
			} else if !errors.Is(err, ErrRefused) {
				t.Fatalf("Open: %v does not wrap ErrRefused", err)
			}
		}

		// Any payload the key signs: what Verify makes of its task.
		if len(payload) == 0 {
			return
		}
		env = Envelope{Payload: payload, Signature: ed25519.Sign(fuzzKey, payload)}
		task, err := v.Verify(env)
		checkVerdict(t, task, err)
		flipped := Envelope{Payload: bytes.Clone(payload), Signature: env.Signature}
		flipped.Payload[len(payload)/2] ^= 0x20
		if _, err := v.Verify(flipped); !errors.Is(err, ErrBadSignature) {
			t.Fatalf("a payload changed after signing: got %v; want %v", err, ErrBadSignature)
		}
		if err != nil {
			return
		}
		if task.ID == "" || task.Type == "" || task.NodeID != v.NodeID ||
			fuzzNow.Add(v.Skew).Before(task.IssuedAt) || !fuzzNow.Add(-v.Skew).Before(task.ExpiresAt) {
			t.Fatalf("accepted %+v", task)
		}
		again, err := Sign(fuzzKey, task)
		if err != nil {
			t.Fatalf("an accepted task cannot be signed again: %v", err)
		}
		back, err := v.Verify(again)
		if err != nil {
			t.Fatalf("re-signed task refused: %v", err)
		}
		if len(task.Params) == 0 {
			task.Params = json.RawMessage("{}") // as Sign sends a task without params
		}
		if a, b := mustJSON(t, task), mustJSON(t, back); !bytes.Equal(a, b) {
			t.Fatalf("round trip: got %s; want %s", b, a)
		}
	})
}

// checkVerdict: a task or an error wrapping ErrRefused, never both.
func checkVerdict(t *testing.T, task Task, err error) {
	t.Helper()
	if err != nil {
		if !errors.Is(err, ErrRefused) {
			t.Fatalf("error %v does not wrap ErrRefused", err)
		}
		if task.ID != "" || task.Type != "" || task.NodeID != "" || task.Params != nil || !task.IssuedAt.IsZero() || !task.ExpiresAt.IsZero() || task.Corr != "" {
			t.Fatalf("got task %+v with error %v", task, err)
		}
	}
}

func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
