package core

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"

	gossh "golang.org/x/crypto/ssh"

	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/sshcert"
)

// TrustSet is one reading of controld's CA keys. It is replaced whole on
// refresh, never modified, so readers need no lock.
type TrustSet struct {
	// User signs the certificates users authenticate with.
	User []gossh.PublicKey
	// Host signs the gateway's host certificate.
	Host []gossh.PublicKey
	// Internal signs tickets, and the host certificates of hostd terminal
	// servers the gateway accepts.
	Internal []gossh.PublicKey
}

// trust holds the current TrustSet.
type trust struct {
	cur atomic.Pointer[TrustSet]
}

func (t *trust) get() *TrustSet { return t.cur.Load() }

// FetchTrust reads the CA keys from controld. The user CA must have keys;
// the others may be empty (an older controld, a gateway token that does not
// see the internal CA).
func FetchTrust(ctx context.Context, c *api.Client) (*TrustSet, error) {
	resp, err := c.SSHCAs(ctx)
	if err != nil {
		return nil, fmt.Errorf("fetch ssh CAs: %w", err)
	}
	ts := &TrustSet{}
	if ts.User, err = parseKeys(resp.User); err != nil {
		return nil, fmt.Errorf("fetch ssh CAs: user CA: %w", err)
	}
	if len(ts.User) == 0 {
		return nil, fmt.Errorf("fetch ssh CAs: %w", ErrNoCAKeys)
	}
	if ts.Host, err = parseKeys(resp.Host); err != nil {
		return nil, fmt.Errorf("fetch ssh CAs: host CA: %w", err)
	}
	if ts.Internal, err = parseKeys(resp.Internal); err != nil {
		return nil, fmt.Errorf("fetch ssh CAs: internal CA: %w", err)
	}
	return ts, nil
}

func parseKeys(lines []string) ([]gossh.PublicKey, error) {
	if len(lines) == 0 {
		return nil, nil
	}
	return sshcert.ParseTrusted([]byte(strings.Join(lines, "\n")))
}

// ContainsKey reports whether k is one of keys (by wire form).
func ContainsKey(keys []gossh.PublicKey, k gossh.PublicKey) bool {
	for _, t := range keys {
		if t != nil && k != nil && string(t.Marshal()) == string(k.Marshal()) {
			return true
		}
	}
	return false
}

// CATrusted reports whether the CA with SHA256 fingerprint fp is among keys.
func CATrusted(keys []gossh.PublicKey, fp string) bool {
	for _, k := range keys {
		if gossh.FingerprintSHA256(k) == fp {
			return true
		}
	}
	return false
}
