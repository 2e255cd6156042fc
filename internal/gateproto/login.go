package gateproto

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nkeys"

	"github.com/gpuaas/gpuaas/internal/api"
)

// GatewayLogin keeps a gateway (sshgate) logged in to controld: it signs a
// login assertion with the gateway's registered key and renews the
// short-lived session token before it ends. The key's seed never leaves
// the gateway; no long-lived token exists.
type GatewayLogin struct {
	client *api.Client
	key    nkeys.KeyPair
	pub    string
	now    func() time.Time

	// mu protects the following.
	mu      sync.Mutex
	token   string
	renewAt time.Time
	expires time.Time
}

// NewGatewayLogin logs in over nc with key; now is the clock (time.Now
// when nil).
func NewGatewayLogin(nc *nats.Conn, key nkeys.KeyPair, now func() time.Time) (*GatewayLogin, error) {
	pub, err := key.PublicKey()
	if err != nil {
		return nil, fmt.Errorf("gateway key: %w", err)
	}
	if now == nil {
		now = time.Now
	}
	proof, err := api.ReplyProof(key)
	if err != nil {
		return nil, err
	}
	return &GatewayLogin{client: api.NewClient(nc, api.WithReplyProof(proof)), key: key, pub: pub, now: now}, nil
}

// Token returns a session token valid for a while yet, logging in again
// once two thirds of the last one's life have passed.
func (l *GatewayLogin) Token(ctx context.Context) (string, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.now()
	if l.token != "" && now.Before(l.renewAt) {
		return l.token, nil
	}
	var nonce [16]byte
	_, _ = rand.Read(nonce[:])
	req := GateLoginRequest{PublicKey: l.pub, IssuedAt: now.UTC(), Nonce: hex.EncodeToString(nonce[:])}
	sig, err := l.key.Sign(GateLoginMessage(req.PublicKey, req.IssuedAt, req.Nonce))
	if err != nil {
		return "", fmt.Errorf("sign gateway login: %w", err)
	}
	req.Signature = sig
	resp, err := api.Do(ctx, l.client, OpGateLogin, req)
	if err != nil {
		if l.token != "" && now.Add(time.Minute).Before(l.expires) {
			// Keep serving with the token we have while it lasts.
			return l.token, nil
		}
		return "", fmt.Errorf("gateway login: %w", err)
	}
	l.token, l.expires = resp.Token, resp.ExpiresAt
	l.renewAt = now.Add(resp.ExpiresAt.Sub(now) * 2 / 3)
	return l.token, nil
}

// GateLoginRequest is a gateway's login assertion: its key signs
// GateLoginMessage(PublicKey, IssuedAt, Nonce).
type GateLoginRequest struct {
	PublicKey string    `json:"public_key"`
	IssuedAt  time.Time `json:"issued_at"`
	Nonce     string    `json:"nonce"`
	Signature []byte    `json:"signature"`
}

// GateLoginMessage is what a gateway signs to log in.
func GateLoginMessage(publicKey string, issuedAt time.Time, nonce string) []byte {
	return []byte("gpuaas gate.login\n" + publicKey + "\n" + issuedAt.UTC().Format(time.RFC3339Nano) + "\n" + nonce)
}
