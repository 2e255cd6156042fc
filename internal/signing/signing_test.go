package signing

import (
	"crypto/ed25519"
	"crypto/rand"
	"encoding/json"
	"errors"
	"testing"
	"time"
)

func TestVerify(t *testing.T) {
	pub, priv, _ := ed25519.GenerateKey(rand.Reader)
	otherPub, otherPriv, _ := ed25519.GenerateKey(rand.Reader)
	now := time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)
	task := Task{ID: "t-1", NodeID: "n-1", Type: "diag.health_probe", Params: json.RawMessage(`{"x":1}`),
		IssuedAt: now.Add(-time.Second), ExpiresAt: now.Add(time.Minute)}
	sign := func(k ed25519.PrivateKey, t Task) Envelope {
		env, err := Sign(k, t)
		if err != nil {
			panic(err)
		}
		return env
	}
	good := sign(priv, task)
	tampered := sign(priv, task)
	tampered.Payload = []byte(string(tampered.Payload[:len(tampered.Payload)-2]) + "2}")
	wrongNode := task
	wrongNode.NodeID = "n-2"
	expired := task
	expired.ExpiresAt = now.Add(-time.Minute)
	future := task
	future.IssuedAt = now.Add(time.Hour)

	tests := []struct {
		name string
		keys []ed25519.PublicKey
		env  Envelope
		want error
	}{
		{"valid", []ed25519.PublicKey{pub}, good, nil},
		{"valid with rotated keys", []ed25519.PublicKey{otherPub, pub}, good, nil},
		{"tampered params", []ed25519.PublicKey{pub}, tampered, ErrBadSignature},
		{"other key", []ed25519.PublicKey{pub}, sign(otherPriv, task), ErrBadSignature},
		{"no keys", nil, good, ErrBadSignature},
		{"wrong node", []ed25519.PublicKey{pub}, sign(priv, wrongNode), ErrWrongNode},
		{"expired", []ed25519.PublicKey{pub}, sign(priv, expired), ErrExpired},
		{"not yet valid", []ed25519.PublicKey{pub}, sign(priv, future), ErrNotYetValid},
		{"truncated signature", []ed25519.PublicKey{pub}, Envelope{Payload: good.Payload, Signature: good.Signature[:10]}, ErrMalformed},
		{"signed garbage", []ed25519.PublicKey{pub}, Envelope{Payload: []byte("xx"), Signature: ed25519.Sign(priv, []byte("xx"))}, ErrMalformed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v := &Verifier{Keys: tt.keys, NodeID: "n-1", Skew: 5 * time.Second, Now: func() time.Time { return now }}
			got, err := v.Verify(tt.env)
			if !errors.Is(err, tt.want) {
				t.Fatalf("got %v; want %v", err, tt.want)
			}
			if err == nil && (got.ID != task.ID || string(got.Params) != `{"x":1}`) {
				t.Fatalf("got task %+v; want %+v", got, task)
			}
			if err != nil && !errors.Is(err, ErrRefused) {
				t.Fatalf("got %v; want it to wrap ErrRefused", err)
			}
		})
	}
}
