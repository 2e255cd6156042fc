package signing

import (
	"bytes"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/json"
	"errors"
	"testing"
	"time"
)

// TestCorrelationIDIsSignedAndOptional: an envelope of a task without a
// correlation id is the bytes an envelope was before the field existed,
// and verifies; one with an id verifies and hands the id over; changing
// the id breaks the signature.
func TestCorrelationIDIsSignedAndOptional(t *testing.T) {
	pub, priv, _ := ed25519.GenerateKey(rand.Reader)
	now := time.Date(2026, 11, 24, 3, 0, 0, 0, time.UTC)
	v := &Verifier{Keys: []ed25519.PublicKey{pub}, NodeID: "n-1", Skew: time.Second, Now: func() time.Time { return now }}
	task := Task{ID: "t-1", NodeID: "n-1", Type: "diag.health_probe", Params: json.RawMessage(`{}`),
		IssuedAt: now.Add(-time.Second), ExpiresAt: now.Add(time.Minute)}

	// An envelope as hostd received it before correlation ids: the same
	// fields, signed over their JSON.
	old, _ := json.Marshal(struct {
		ID        string          `json:"task_id"`
		NodeID    string          `json:"node_id"`
		Type      string          `json:"type"`
		Params    json.RawMessage `json:"params"`
		IssuedAt  time.Time       `json:"issued_at"`
		ExpiresAt time.Time       `json:"expires_at"`
	}{task.ID, task.NodeID, task.Type, task.Params, task.IssuedAt, task.ExpiresAt})
	plain, err := Sign(priv, task)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(plain.Payload, old) {
		t.Errorf("payload without a correlation id\n%s\nwant the old bytes\n%s", plain.Payload, old)
	}
	if got, err := v.Verify(Envelope{Payload: old, Signature: ed25519.Sign(priv, old)}); err != nil || got.Corr != "" {
		t.Errorf("old envelope: got %+v, %v; want it verified without an id", got, err)
	}

	task.Corr = "req-42"
	withID, err := Sign(priv, task)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := v.Verify(withID); err != nil || got.Corr != "req-42" {
		t.Errorf("got %+v, %v; want the task with corr req-42", got, err)
	}
	forged := withID
	forged.Payload = bytes.Replace(withID.Payload, []byte(`"req-42"`), []byte(`"req-43"`), 1)
	if _, err := v.Verify(forged); !errors.Is(err, ErrBadSignature) {
		t.Errorf("changed correlation id: got %v; want %v", err, ErrBadSignature)
	}
}
