package sshgate

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"

	gossh "golang.org/x/crypto/ssh"

	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/sshcert"
)

// trustSet is one reading of controld's CA keys. It is replaced whole on
// refresh, never modified, so readers need no lock.
type trustSet struct {
	// user signs the certificates users authenticate with.
	user []gossh.PublicKey
	// host signs the gateway's host certificate.
	host []gossh.PublicKey
	// internal signs tickets, and the host certificates of hostd terminal
	// servers the gateway accepts.
	internal []gossh.PublicKey
}

// trust holds the current trustSet.
type trust struct {
	cur atomic.Pointer[trustSet]
}

func (t *trust) get() *trustSet { return t.cur.Load() }

// fetchTrust reads the CA keys from controld. The user CA must have keys;
// the others may be empty (an older controld, a gateway token that does not
// see the internal CA).
func fetchTrust(ctx context.Context, c *api.Client) (*trustSet, error) {
	resp, err := c.SSHCAs(ctx)
	if err != nil {
		return nil, fmt.Errorf("fetch ssh CAs: %w", err)
	}
	ts := &trustSet{}
	if ts.user, err = parseKeys(resp.User); err != nil {
		return nil, fmt.Errorf("fetch ssh CAs: user CA: %w", err)
	}
	if len(ts.user) == 0 {
		return nil, fmt.Errorf("fetch ssh CAs: %w", ErrNoCAKeys)
	}
	if ts.host, err = parseKeys(resp.Host); err != nil {
		return nil, fmt.Errorf("fetch ssh CAs: host CA: %w", err)
	}
	if ts.internal, err = parseKeys(resp.Internal); err != nil {
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

// containsKey reports whether k is one of keys (by wire form).
func containsKey(keys []gossh.PublicKey, k gossh.PublicKey) bool {
	for _, t := range keys {
		if t != nil && k != nil && string(t.Marshal()) == string(k.Marshal()) {
			return true
		}
	}
	return false
}

// caTrusted reports whether the CA with SHA256 fingerprint fp is among keys.
func caTrusted(keys []gossh.PublicKey, fp string) bool {
	for _, k := range keys {
		if gossh.FingerprintSHA256(k) == fp {
			return true
		}
	}
	return false
}
