// Package trustbundle is what controld vouches for to CLIs about its SSH
// gateway — where it is and which host CA keys sign its host certificate —
// signed with controld's server key, so that a CLI that pinned the server
// key at its first login can tell a genuine change (a CA rotation, a moved
// gateway) from a forged answer, and refuse the latter.
//
// The server key is controld's session-token key (Ed25519). It is the
// server's identity in the strongest sense available: whoever holds it can
// already mint any user's session, so trusting it for the bundle adds no
// new secret to protect, and a CLI that pins it can also check that a login
// reply carries a token controld signed (a fake responder cannot make one).
//
// Wire form: api.TrustBundle, the statement's JSON in base64 and an Ed25519
// signature over SigningContext followed by those JSON bytes. The prefix
// keeps a bundle signature from ever being a valid session-token (JWT)
// signature or the other way round: JWT signing input starts with the
// base64 of "{".
package trustbundle

import (
	"crypto/ed25519"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"golang.org/x/crypto/ssh"

	"github.com/gpuaas/gpuaas/internal/api"
)

// SigningContext prefixes the bytes a bundle signature covers.
const SigningContext = "gpuaas-trust-bundle-v1\n"

// Version is the statement version this package writes and reads.
const Version = 1

// ErrInvalid is a bundle that is malformed or whose signature does not
// verify.
var ErrInvalid = errors.New("invalid trust bundle")

// Statement is what a bundle says.
type Statement struct {
	Version int `json:"version"`
	// ServerKey signed the statement: authorized_keys form, ssh-ed25519.
	ServerKey string `json:"server_key"`
	// HostCAs are the host CA keys the gateway's certificate may be signed
	// by, authorized_keys form, the active key first.
	HostCAs []string `json:"host_cas"`
	// RetiredHostCAs are the SHA256 fingerprints of host CA keys retired
	// for good: a CLI drops them from its pins and never trusts them again.
	RetiredHostCAs []string `json:"retired_host_cas,omitempty"`
	// Gateway is where users ssh to ("host:port"); empty when controld was
	// not told.
	Gateway  string    `json:"gateway,omitempty"`
	IssuedAt time.Time `json:"issued_at"`
}

// ServerKeyLine is an Ed25519 public key in authorized_keys form, as
// Statement.ServerKey and pins hold it.
func ServerKeyLine(pub ed25519.PublicKey) (string, error) {
	k, err := ssh.NewPublicKey(pub)
	if err != nil {
		return "", fmt.Errorf("server key: %w", err)
	}
	return strings.TrimSpace(string(ssh.MarshalAuthorizedKey(k))), nil
}

// Fingerprint is the SHA256 fingerprint of a key in authorized_keys form,
// or "" when it does not parse.
func Fingerprint(line string) string {
	k, _, _, _, err := ssh.ParseAuthorizedKey([]byte(line))
	if err != nil {
		return ""
	}
	return ssh.FingerprintSHA256(k)
}

// Sign makes the bundle of st, signed by key; st's ServerKey and Version
// are set from key.
func Sign(key ed25519.PrivateKey, st Statement) (*api.TrustBundle, error) {
	if len(key) != ed25519.PrivateKeySize {
		return nil, fmt.Errorf("sign trust bundle: not an ed25519 private key")
	}
	line, err := ServerKeyLine(key.Public().(ed25519.PublicKey))
	if err != nil {
		return nil, err
	}
	st.Version, st.ServerKey = Version, line
	body, err := json.Marshal(st)
	if err != nil {
		return nil, fmt.Errorf("sign trust bundle: %w", err)
	}
	sig := ed25519.Sign(key, append([]byte(SigningContext), body...))
	return &api.TrustBundle{
		Statement: base64.StdEncoding.EncodeToString(body),
		Signature: base64.StdEncoding.EncodeToString(sig),
	}, nil
}

// Open checks that b is well formed and signed by the server key its
// statement names, and returns the statement. Whether that key is one to
// trust is the caller's question (see internal/trust): Open only proves the
// statement and the key go together.
func Open(b *api.TrustBundle) (Statement, error) {
	if b == nil {
		return Statement{}, fmt.Errorf("%w: none", ErrInvalid)
	}
	body, err := base64.StdEncoding.DecodeString(b.Statement)
	if err != nil {
		return Statement{}, fmt.Errorf("%w: statement: %v", ErrInvalid, err)
	}
	sig, err := base64.StdEncoding.DecodeString(b.Signature)
	if err != nil || len(sig) != ed25519.SignatureSize {
		return Statement{}, fmt.Errorf("%w: malformed signature", ErrInvalid)
	}
	var st Statement
	if err := json.Unmarshal(body, &st); err != nil {
		return Statement{}, fmt.Errorf("%w: statement: %v", ErrInvalid, err)
	}
	if st.Version != Version {
		return Statement{}, fmt.Errorf("%w: version %d, this client reads %d", ErrInvalid, st.Version, Version)
	}
	pub, err := ServerPublicKey(st.ServerKey)
	if err != nil {
		return Statement{}, err
	}
	if !ed25519.Verify(pub, append([]byte(SigningContext), body...), sig) {
		return Statement{}, fmt.Errorf("%w: the signature does not verify with %s", ErrInvalid, Fingerprint(st.ServerKey))
	}
	if len(st.HostCAs) == 0 {
		return Statement{}, fmt.Errorf("%w: no host CA keys", ErrInvalid)
	}
	for _, line := range st.HostCAs {
		k, _, _, _, err := ssh.ParseAuthorizedKey([]byte(line))
		if err != nil {
			return Statement{}, fmt.Errorf("%w: host CA key %q: %v", ErrInvalid, line, err)
		}
		if _, ok := k.(*ssh.Certificate); ok {
			return Statement{}, fmt.Errorf("%w: a certificate as host CA key", ErrInvalid)
		}
	}
	return st, nil
}

// ServerPublicKey parses a server key in authorized_keys form; only
// Ed25519 keys are server keys.
func ServerPublicKey(line string) (ed25519.PublicKey, error) {
	k, _, _, _, err := ssh.ParseAuthorizedKey([]byte(line))
	if err != nil {
		return nil, fmt.Errorf("%w: server key: %v", ErrInvalid, err)
	}
	ck, ok := k.(ssh.CryptoPublicKey)
	if !ok || k.Type() != ssh.KeyAlgoED25519 {
		return nil, fmt.Errorf("%w: server key is a %s key, want ed25519", ErrInvalid, k.Type())
	}
	pub, ok := ck.CryptoPublicKey().(ed25519.PublicKey)
	if !ok {
		return nil, fmt.Errorf("%w: server key is not ed25519", ErrInvalid)
	}
	return pub, nil
}
