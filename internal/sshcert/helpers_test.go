package sshcert

import (
	"crypto/ed25519"
	"crypto/rand"
	"errors"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"
)

// now is the fixed instant the tests mint and verify at.
var now = time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)

func newPrivateKey(t *testing.T) ed25519.PrivateKey {
	t.Helper()
	k, err := GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func newSigner(t *testing.T) ssh.Signer {
	t.Helper()
	s, err := ssh.NewSignerFromKey(newPrivateKey(t))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func newAuthority(t *testing.T, name string, active ed25519.PrivateKey, alsoTrusted ...ssh.PublicKey) *Authority {
	t.Helper()
	a, err := New(name, active, alsoTrusted...)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

func publicOf(t *testing.T, k ed25519.PrivateKey) ssh.PublicKey {
	t.Helper()
	pub, err := ssh.NewPublicKey(k.Public())
	if err != nil {
		t.Fatal(err)
	}
	return pub
}

// craft signs an arbitrary certificate with ca, for the shapes the Sign
// methods refuse to mint (host certs passed as user certs, stray options,
// infinite validity, no principals...).
func craft(t *testing.T, ca ssh.Signer, cert ssh.Certificate) *ssh.Certificate {
	t.Helper()
	if cert.Key == nil {
		cert.Key = newSigner(t).PublicKey()
	}
	if cert.Serial == 0 {
		cert.Serial = 7
	}
	if err := cert.SignCert(rand.Reader, ca); err != nil {
		t.Fatal(err)
	}
	return &cert
}

// window is a certificate validity window around now.
func window(after, before time.Duration) (uint64, uint64) {
	return uint64(now.Add(after).Unix()), uint64(now.Add(before).Unix())
}

// reparse takes a certificate through its wire form, as a server sees it.
func reparse(t *testing.T, key ssh.PublicKey) ssh.PublicKey {
	t.Helper()
	parsed, err := ssh.ParsePublicKey(key.Marshal())
	if err != nil {
		t.Fatal(err)
	}
	return parsed
}

func certSigner(t *testing.T, cert *ssh.Certificate, key ssh.Signer) ssh.Signer {
	t.Helper()
	s, err := ssh.NewCertSigner(cert, key)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func checkErr(t *testing.T, err, want error) {
	t.Helper()
	if want == nil && err != nil {
		t.Fatalf("got error %v; want none", err)
	}
	if !errors.Is(err, want) {
		t.Fatalf("got error %v; want %v", err, want)
	}
	if want != nil && !errors.Is(err, ErrRefused) && !errors.Is(err, ErrInvalidRequest) {
		t.Fatalf("got error %v; want it to wrap ErrRefused or ErrInvalidRequest", err)
	}
}
