// Package signing seals the tasks controld sends to hostd: an Ed25519
// signature over the exact payload bytes, so hostd runs only what controld
// signed, for the node it was meant for, while it is fresh. Replay of a
// task id is hostd's to refuse (it keeps the seen-set).
package signing

import (
	"crypto/ed25519"
	"encoding/json"
	"errors"
	"fmt"
	"time"
)

// Errors returned by Verify; each wraps ErrRefused.
var (
	ErrRefused      = errors.New("task envelope refused")
	ErrMalformed    = fmt.Errorf("%w: malformed", ErrRefused)
	ErrBadSignature = fmt.Errorf("%w: bad signature", ErrRefused)
	ErrWrongNode    = fmt.Errorf("%w: for another node", ErrRefused)
	ErrExpired      = fmt.Errorf("%w: expired", ErrRefused)
	ErrNotYetValid  = fmt.Errorf("%w: not yet valid", ErrRefused)
)

// Task is what controld asks a node to do.
type Task struct {
	ID        string          `json:"task_id"`
	NodeID    string          `json:"node_id"`
	Type      string          `json:"type"`
	Params    json.RawMessage `json:"params"`
	IssuedAt  time.Time       `json:"issued_at"`
	ExpiresAt time.Time       `json:"expires_at"`
	// Corr is the correlation id of the request behind the task, for
	// hostd's log lines about it and nothing else. It is signed with the
	// rest; left out when empty, so an envelope without one is the bytes
	// it always was.
	Corr string `json:"corr,omitempty"`
}

// Envelope is a signed task on the wire. Payload is the task's JSON; the
// signature covers exactly those bytes, so no canonical form is needed.
type Envelope struct {
	Payload   []byte `json:"payload"`
	Signature []byte `json:"signature"`
}

// Sign seals t with key.
func Sign(key ed25519.PrivateKey, t Task) (Envelope, error) {
	if len(t.Params) == 0 {
		t.Params = json.RawMessage("{}")
	}
	payload, err := json.Marshal(t)
	if err != nil {
		return Envelope{}, fmt.Errorf("sign task %s: %w", t.ID, err)
	}
	return Envelope{Payload: payload, Signature: ed25519.Sign(key, payload)}, nil
}

// Verifier checks envelopes for one node against controld's pinned keys.
type Verifier struct {
	// Keys are the trusted task keys (several during a rotation).
	Keys   []ed25519.PublicKey
	NodeID string
	// Skew tolerated between controld's and this node's clocks.
	Skew time.Duration
	Now  func() time.Time
}

// Verify checks the signature, then the node, then the validity window,
// and returns the task.
func (v *Verifier) Verify(env Envelope) (Task, error) {
	if len(env.Payload) == 0 || len(env.Signature) != ed25519.SignatureSize {
		return Task{}, ErrMalformed
	}
	signed := false
	for _, k := range v.Keys {
		if len(k) == ed25519.PublicKeySize && ed25519.Verify(k, env.Payload, env.Signature) {
			signed = true
			break
		}
	}
	if !signed {
		return Task{}, ErrBadSignature
	}
	var t Task
	if err := json.Unmarshal(env.Payload, &t); err != nil || t.ID == "" || t.Type == "" {
		return Task{}, ErrMalformed
	}
	if t.NodeID != v.NodeID {
		return Task{}, fmt.Errorf("%w (%s, this is %s)", ErrWrongNode, t.NodeID, v.NodeID)
	}
	now := v.Now()
	if now.Add(v.Skew).Before(t.IssuedAt) {
		return Task{}, ErrNotYetValid
	}
	if !now.Add(-v.Skew).Before(t.ExpiresAt) {
		return Task{}, fmt.Errorf("%w at %s", ErrExpired, t.ExpiresAt.Format(time.RFC3339))
	}
	return t, nil
}

// Seal signs any JSON-encodable message (hostd's reports to controld)
// the same way tasks are signed.
func Seal(key ed25519.PrivateKey, v any) (Envelope, error) {
	payload, err := json.Marshal(v)
	if err != nil {
		return Envelope{}, fmt.Errorf("seal: %w", err)
	}
	return Envelope{Payload: payload, Signature: ed25519.Sign(key, payload)}, nil
}

// Open checks env's signature against key and decodes its payload into v.
func Open(key ed25519.PublicKey, env Envelope, v any) error {
	if len(key) != ed25519.PublicKeySize || len(env.Signature) != ed25519.SignatureSize {
		return ErrMalformed
	}
	if !ed25519.Verify(key, env.Payload, env.Signature) {
		return ErrBadSignature
	}
	if err := json.Unmarshal(env.Payload, v); err != nil {
		return ErrMalformed
	}
	return nil
}
