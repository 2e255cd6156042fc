package core

import (
	"context"
	"crypto/ed25519"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	gossh "golang.org/x/crypto/ssh"

	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/gateproto"
)

// The gateway's own credential towards hostd. A node's terminal server
// lets a connection in only after it proved a gateway certificate, then a
// ticket (hostd/term). The gateway certificate certifies the gateway key —
// the Ed25519 key of the gateway's registered NATS identity (`gpuaas ops
// nats-identity add --kind gateway`); controld certifies it for an hour at
// a time (gate.credentials) and the gateway renews it at half-life. A
// gateway token alone therefore opens no shell: it also takes the private
// half of a registered gateway key.

// gatewayKeyLine is the authorized_keys form of key's public half.
func gatewayKeyLine(key ed25519.PrivateKey) (string, error) {
	pub, err := gossh.NewPublicKey(key.Public())
	if err != nil {
		return "", fmt.Errorf("gateway key: %w", err)
	}
	return strings.TrimSpace(string(gossh.MarshalAuthorizedKey(pub))), nil
}

// gatewayCreds holds the gateway key and its current certificate.
type gatewayCreds struct {
	key  gossh.Signer
	line string // the key's authorized_keys line

	// mu protects the following.
	mu     sync.Mutex
	cert   *gossh.Certificate
	signer gossh.Signer // key with cert
	name   string       // the name the key is registered under
}

func newGatewayCreds(key ed25519.PrivateKey) (*gatewayCreds, error) {
	signer, err := gossh.NewSignerFromKey(key)
	if err != nil {
		return nil, fmt.Errorf("gateway key: %w", err)
	}
	line, err := gatewayKeyLine(key)
	if err != nil {
		return nil, err
	}
	return &gatewayCreds{key: signer, line: line}, nil
}

// current returns the certificate signer, if the certificate is valid at
// now.
func (c *gatewayCreds) current(now time.Time) (gossh.Signer, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.cert == nil {
		return nil, fmt.Errorf("%w: none obtained yet (is the gateway's key %s registered as a gateway?)", ErrNoGatewayCredentials,
			gossh.FingerprintSHA256(c.key.PublicKey()))
	}
	if !now.Before(time.Unix(int64(c.cert.ValidBefore), 0)) {
		return nil, fmt.Errorf("%w: the gateway certificate expired at %s", ErrNoGatewayCredentials,
			time.Unix(int64(c.cert.ValidBefore), 0).UTC().Format(time.RFC3339))
	}
	return c.signer, nil
}

// untilRenewal is how long until the certificate is at half-life (zero
// when there is none).
func (c *gatewayCreds) untilRenewal(now time.Time) time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.cert == nil {
		return 0
	}
	after, before := time.Unix(int64(c.cert.ValidAfter), 0), time.Unix(int64(c.cert.ValidBefore), 0)
	return after.Add(before.Sub(after) / 2).Sub(now)
}

// GatewayCredential is the gateway certificate's signer, if the
// certificate is valid at now: the first credential a node's terminal
// server asks for.
func (c *Core) GatewayCredential(now time.Time) (gossh.Signer, error) { return c.creds.current(now) }

// RenewGatewayCert asks controld for a gateway certificate of the gateway
// key and checks it certifies that key.
func (c *Core) RenewGatewayCert(ctx context.Context) error {
	creds := c.creds
	resp, err := gateproto.GateCredentials(ctx, c.cfg.Client, gateproto.GateCredentialsRequest{PublicKey: creds.line})
	if err != nil {
		return fmt.Errorf("gateway certificate: %w", err)
	}
	pub, _, _, _, err := gossh.ParseAuthorizedKey([]byte(resp.Certificate))
	if err != nil {
		return fmt.Errorf("gateway certificate: %w", err)
	}
	cert, ok := pub.(*gossh.Certificate)
	if !ok || string(cert.Key.Marshal()) != string(creds.key.PublicKey().Marshal()) {
		return errors.New("gateway certificate: controld certified another key")
	}
	signer, err := gossh.NewCertSigner(cert, creds.key)
	if err != nil {
		return fmt.Errorf("gateway certificate: %w", err)
	}
	creds.mu.Lock()
	creds.cert, creds.signer, creds.name = cert, signer, resp.Name
	creds.mu.Unlock()
	c.log.Info("gateway certificate renewed", "name", resp.Name, "valid_before", resp.ValidBefore)
	return nil
}

// KeepGatewayCert keeps the gateway certificate fresh: renewed at
// half-life, retried with backoff (up to RefreshInterval) while controld
// refuses or cannot be reached.
func (c *Core) KeepGatewayCert(ctx context.Context) {
	const first = time.Second
	backoff := first
	for {
		wait := min(c.creds.untilRenewal(c.cfg.Now()), c.cfg.RefreshInterval)
		if wait <= 0 {
			if err := c.RenewGatewayCert(ctx); err != nil {
				if ctx.Err() != nil {
					return
				}
				c.LogCredsError(err)
				wait, backoff = backoff, min(backoff*2, c.cfg.RefreshInterval)
			} else {
				backoff = first
				continue
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
	}
}

// LogCredsError says why there is no certificate, and what to do when the
// key is not registered.
func (c *Core) LogCredsError(err error) {
	if errors.Is(err, api.ErrForbidden) {
		c.log.Error("no gateway certificate: shells cannot be opened until this gateway's key is registered as a gateway",
			"err", err, "register", "gpuaas ops nats-identity add --kind gateway (its seed is the gateway's --nkey)")
		return
	}
	c.log.Warn("gateway certificate not renewed", "err", err)
}
