package sshtest

import (
	"crypto/ed25519"
	"encoding/pem"
	"errors"
	"io"
	"strings"
	"sync"
	"testing"

	gossh "golang.org/x/crypto/ssh"

	"github.com/gpuaas/gpuaas/internal/sshcert"
)

// NewKey is a fresh ed25519 private key.
func NewKey(t testing.TB) ed25519.PrivateKey {
	t.Helper()
	k, err := sshcert.GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// SignerOf is the signer of k.
func SignerOf(t testing.TB, k ed25519.PrivateKey) gossh.Signer {
	t.Helper()
	s, err := gossh.NewSignerFromKey(k)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// NewSigner is the signer of a fresh key.
func NewSigner(t testing.TB) gossh.Signer { return SignerOf(t, NewKey(t)) }

// CertSigner signs with s, presenting cert (which certifies s's key).
func CertSigner(t testing.TB, cert *gossh.Certificate, s gossh.Signer) gossh.Signer {
	t.Helper()
	cs, err := gossh.NewCertSigner(cert, s)
	if err != nil {
		t.Fatal(err)
	}
	return cs
}

// AuthorizedKey is k as one authorized_keys line, without its newline.
func AuthorizedKey(k gossh.PublicKey) string {
	return strings.TrimSpace(string(gossh.MarshalAuthorizedKey(k)))
}

// PrivateKeyPEM is k in OpenSSH's private key format, as ssh -i and
// gossh.ParsePrivateKey read it.
func PrivateKeyPEM(t testing.TB, k ed25519.PrivateKey, comment string) []byte {
	t.Helper()
	block, err := gossh.MarshalPrivateKey(k, comment)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(block)
}

// NewAuthority is a CA named name (api.CAUser, api.CAHost,
// api.CAInternal) of a fresh key: one nobody else knows.
func NewAuthority(t testing.TB, name string) *sshcert.Authority {
	t.Helper()
	return AuthorityOf(t, name, NewKey(t))
}

// AuthorityOf is a CA named name signing with key and also trusting
// alsoTrusted (a CA in the middle of a key rotation).
func AuthorityOf(t testing.TB, name string, key ed25519.PrivateKey, alsoTrusted ...gossh.PublicKey) *sshcert.Authority {
	t.Helper()
	a, err := sshcert.New(name, key, alsoTrusted...)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// OfferOnly offers s's key without being able to sign with it (an SSH
// "query"): the client asks whether the key would do and never proves it
// holds it, as anyone can with a certificate they copied.
func OfferOnly(s gossh.Signer) gossh.Signer { return offerOnly{s} }

type offerOnly struct{ gossh.Signer }

func (offerOnly) Sign(io.Reader, []byte) (*gossh.Signature, error) {
	return nil, errors.New("offered only: no private key")
}

// Steps plays auth methods in order, one per attempt, then gives up.
func Steps(methods ...gossh.AuthMethod) gossh.ClientAuthCallback {
	var mu sync.Mutex
	return func(*gossh.ClientAuthContext) (gossh.AuthMethod, error) {
		mu.Lock()
		defer mu.Unlock()
		if len(methods) == 0 {
			return nil, errors.New("no more steps")
		}
		m := methods[0]
		methods = methods[1:]
		return m, nil
	}
}
