// Package sshcert holds gpuaas's SSH certificate authorities: the user CA
// (certificates `gpuaas login` obtains), the host CA (the gateway's host key)
// and the internal CA (one-minute tickets for the gateway→hostd hop).
//
// It is a pure library: controld stores the keys and calls Authority to mint;
// sshgate and hostd call the Verify functions with the trusted public keys.
// Every function that looks at a validity window takes `now`.
//
// Rotation: an Authority signs with one active key and trusts a list of keys.
// A rotation runs in three steps, each a new call to New:
//
//	New(name, oldKey, newKey.Public())  // distribute trust in the new key
//	New(name, newKey, oldKey.Public())  // sign with the new key; old certs still verify
//	New(name, newKey)                   // retire the old key; its certificates are refused
//
// Servers that authenticate with certificates must bind the identity they use
// to the key that actually authenticated (CVE-2024-45337); see Verified.
package sshcert

import (
	"bytes"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/pem"
	"fmt"
	"io"
	"strings"

	"golang.org/x/crypto/ssh"
)

// Authority is one certificate authority: an active signing key and the keys
// whose certificates are trusted (the active key first).
type Authority struct {
	name    string
	signer  ssh.Signer
	trusted []ssh.PublicKey
	rand    io.Reader
}

// New returns the authority called name (used in comments and errors) that
// signs with active and trusts active plus alsoTrusted (the other side of a
// rotation). Duplicates are dropped; certificates are not accepted as CA keys.
func New(name string, active ed25519.PrivateKey, alsoTrusted ...ssh.PublicKey) (*Authority, error) {
	if name == "" || strings.ContainsAny(name, " \t\r\n") {
		return nil, fmt.Errorf("new authority %q: %w: name must be one word", name, ErrInvalidRequest)
	}
	if len(active) != ed25519.PrivateKeySize {
		return nil, fmt.Errorf("new authority %s: %w: active key is not an ed25519 private key", name, ErrInvalidRequest)
	}
	signer, err := ssh.NewSignerFromKey(active)
	if err != nil {
		return nil, fmt.Errorf("new authority %s: %w", name, err)
	}
	a := &Authority{name: name, signer: signer, trusted: []ssh.PublicKey{signer.PublicKey()}, rand: rand.Reader}
	for _, k := range alsoTrusted {
		if k == nil || isCertificate(k) {
			return nil, fmt.Errorf("new authority %s: %w: trusted keys must be plain public keys", name, ErrInvalidRequest)
		}
		if !containsKey(a.trusted, k) {
			a.trusted = append(a.trusted, k)
		}
	}
	return a, nil
}

// Name returns the authority's name.
func (a *Authority) Name() string { return a.name }

// Active returns the public half of the signing key.
func (a *Authority) Active() ssh.PublicKey { return a.signer.PublicKey() }

// Trusted returns the keys whose certificates verify, active key first.
// The slice is a copy.
func (a *Authority) Trusted() []ssh.PublicKey {
	return append([]ssh.PublicKey(nil), a.trusted...)
}

// AuthorizedKeysLines returns one authorized_keys line per trusted key,
// `cert-authority <key> gpuaas-<name>-ca`, for an OpenSSH sshd that should
// accept this authority's user certificates.
func (a *Authority) AuthorizedKeysLines() []string {
	lines := make([]string, 0, len(a.trusted))
	for _, k := range a.trusted {
		lines = append(lines, "cert-authority "+a.keyWithComment(k))
	}
	return lines
}

// KnownHostsLines returns one known_hosts line per trusted key,
// `@cert-authority <pattern> <key> gpuaas-<name>-ca`, so an OpenSSH client
// trusts host certificates of this authority for hosts matching pattern
// (for instance `[localhost]:2222` or `*.gpuaas.example`). There is one
// line per key because during a rotation clients must trust both.
func (a *Authority) KnownHostsLines(pattern string) ([]string, error) {
	if pattern == "" || strings.ContainsAny(pattern, " \t\r\n#") || strings.HasPrefix(pattern, "@") {
		return nil, fmt.Errorf("known_hosts line for %q: %w: not a host pattern", pattern, ErrInvalidRequest)
	}
	lines := make([]string, 0, len(a.trusted))
	for _, k := range a.trusted {
		lines = append(lines, "@cert-authority "+pattern+" "+a.keyWithComment(k))
	}
	return lines, nil
}

func (a *Authority) keyWithComment(k ssh.PublicKey) string {
	return strings.TrimSpace(string(ssh.MarshalAuthorizedKey(k))) + " gpuaas-" + a.name + "-ca"
}

// ParseTrusted reads trusted CA keys in authorized_keys format, one per line,
// with or without the cert-authority option; blank lines and # comments are
// skipped. It is how a verifier (sshgate, hostd) loads the keys controld
// publishes.
func ParseTrusted(data []byte) ([]ssh.PublicKey, error) {
	var keys []ssh.PublicKey
	for n, line := range bytes.Split(data, []byte("\n")) {
		line = bytes.TrimSpace(line)
		if len(line) == 0 || line[0] == '#' {
			continue
		}
		key, _, _, _, err := ssh.ParseAuthorizedKey(line)
		if err != nil {
			return nil, fmt.Errorf("parse trusted keys, line %d: %w", n+1, err)
		}
		if isCertificate(key) {
			return nil, fmt.Errorf("parse trusted keys, line %d: %w: a certificate is not a CA key", n+1, ErrInvalidRequest)
		}
		if !containsKey(keys, key) {
			keys = append(keys, key)
		}
	}
	if len(keys) == 0 {
		return nil, fmt.Errorf("parse trusted keys: %w: no keys", ErrInvalidRequest)
	}
	return keys, nil
}

// GenerateKey returns a fresh ed25519 key for a CA (or any other SSH use).
func GenerateKey() (ed25519.PrivateKey, error) {
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("generate ed25519 key: %w", err)
	}
	return priv, nil
}

// MarshalPrivateKey encodes key as an OpenSSH PEM block ("OPENSSH PRIVATE
// KEY"). With a non-empty passphrase the block is encrypted the way
// ssh-keygen does it; store an unencrypted one with mode 0600.
func MarshalPrivateKey(key ed25519.PrivateKey, comment string, passphrase []byte) ([]byte, error) {
	if len(key) != ed25519.PrivateKeySize {
		return nil, fmt.Errorf("marshal private key: %w: not an ed25519 private key", ErrInvalidRequest)
	}
	var (
		block *pem.Block
		err   error
	)
	if len(passphrase) == 0 {
		block, err = ssh.MarshalPrivateKey(key, comment)
	} else {
		block, err = ssh.MarshalPrivateKeyWithPassphrase(key, comment, passphrase)
	}
	if err != nil {
		return nil, fmt.Errorf("marshal private key: %w", err)
	}
	return pem.EncodeToMemory(block), nil
}

// ParsePrivateKey decodes an OpenSSH PEM ed25519 private key, decrypting it
// with passphrase when one is given.
func ParsePrivateKey(pemBytes, passphrase []byte) (ed25519.PrivateKey, error) {
	var (
		raw any
		err error
	)
	if len(passphrase) == 0 {
		raw, err = ssh.ParseRawPrivateKey(pemBytes)
	} else {
		raw, err = ssh.ParseRawPrivateKeyWithPassphrase(pemBytes, passphrase)
	}
	if err != nil {
		return nil, fmt.Errorf("parse private key: %w", err)
	}
	switch k := raw.(type) {
	case *ed25519.PrivateKey:
		return *k, nil
	case ed25519.PrivateKey:
		return k, nil
	default:
		return nil, fmt.Errorf("parse private key: %w: %T is not ed25519", ErrInvalidRequest, raw)
	}
}

func isCertificate(k ssh.PublicKey) bool {
	_, ok := k.(*ssh.Certificate)
	return ok
}

// containsKey reports whether k is in keys, comparing wire encodings.
// Certificates in keys never match: a certificate is never a CA key.
func containsKey(keys []ssh.PublicKey, k ssh.PublicKey) bool {
	if k == nil || isCertificate(k) {
		return false
	}
	blob := k.Marshal()
	for _, t := range keys {
		if t != nil && !isCertificate(t) && bytes.Equal(t.Marshal(), blob) {
			return true
		}
	}
	return false
}
