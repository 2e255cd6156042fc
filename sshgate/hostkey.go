package sshgate

import (
	"context"
	"crypto/ed25519"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	gossh "golang.org/x/crypto/ssh"

	"github.com/gpuaas/gpuaas/gateway/core"
	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/gateproto"
	"github.com/gpuaas/gpuaas/internal/sshcert"
)

// loadOrCreateHostKey reads the host key at path, or generates one and
// writes it with mode 0600. Like sshd, it refuses a key file others can
// read.
func loadOrCreateHostKey(path string) (ed25519.PrivateKey, error) {
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return createHostKey(path)
	}
	if err != nil {
		return nil, fmt.Errorf("read host key: %w", err)
	}
	info, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("read host key: %w", err)
	}
	if perm := info.Mode().Perm(); perm&0o077 != 0 {
		return nil, fmt.Errorf("host key %s: mode %#o lets others read it; chmod 600 it", path, perm)
	}
	key, err := sshcert.ParsePrivateKey(data, nil)
	if err != nil {
		return nil, fmt.Errorf("host key %s: %w", path, err)
	}
	return key, nil
}

func createHostKey(path string) (ed25519.PrivateKey, error) {
	key, err := sshcert.GenerateKey()
	if err != nil {
		return nil, err
	}
	pemBytes, err := sshcert.MarshalPrivateKey(key, "gpuaas sshgate host key", nil)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, fmt.Errorf("create host key: %w", err)
	}
	// O_EXCL: two gateways starting on one state dir must not both write.
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if errors.Is(err, fs.ErrExist) {
		return loadOrCreateHostKey(path)
	}
	if err != nil {
		return nil, fmt.Errorf("create host key: %w", err)
	}
	if _, err := f.Write(pemBytes); err != nil {
		f.Close()
		return nil, fmt.Errorf("create host key: %w", err)
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return nil, fmt.Errorf("create host key: %w", err)
	}
	if err := f.Close(); err != nil {
		return nil, fmt.Errorf("create host key: %w", err)
	}
	return key, nil
}

// hostCert is the gateway's host certificate and the signer serving it.
type hostCert struct {
	cert   *gossh.Certificate
	signer gossh.Signer
}

// requestHostCert has controld's host CA certify the host key for
// principals, and checks that what came back is a host certificate for
// this key.
func requestHostCert(ctx context.Context, c *api.Client, key gossh.Signer, principals []string) (*hostCert, error) {
	resp, err := gateproto.GateHostCert(ctx, c, gateproto.GateHostCertRequest{
		PublicKey:  strings.TrimSpace(string(gossh.MarshalAuthorizedKey(key.PublicKey()))),
		Principals: principals,
	})
	if err != nil {
		return nil, fmt.Errorf("host certificate: %w", err)
	}
	pub, _, _, _, err := gossh.ParseAuthorizedKey([]byte(resp.Certificate))
	if err != nil {
		return nil, fmt.Errorf("host certificate: parse: %w", err)
	}
	cert, ok := pub.(*gossh.Certificate)
	if !ok || cert.CertType != gossh.HostCert {
		return nil, fmt.Errorf("host certificate: controld returned a %s, not a host certificate", pub.Type())
	}
	if string(cert.Key.Marshal()) != string(key.PublicKey().Marshal()) {
		return nil, fmt.Errorf("host certificate: certifies another key")
	}
	signer, err := gossh.NewCertSigner(cert, key)
	if err != nil {
		return nil, fmt.Errorf("host certificate: %w", err)
	}
	return &hostCert{cert: cert, signer: signer}, nil
}

// due reports whether the certificate should be renewed at now: two thirds
// of its window have passed, or its CA is no longer trusted (a rotation
// retired it).
func (h *hostCert) due(now time.Time, hostCAs []gossh.PublicKey) bool {
	after := time.Unix(int64(h.cert.ValidAfter), 0)
	before := time.Unix(int64(h.cert.ValidBefore), 0)
	if !now.Before(after.Add(before.Sub(after) * 2 / 3)) {
		return true
	}
	return len(hostCAs) > 0 && !core.ContainsKey(hostCAs, h.cert.SignatureKey)
}
