package sshconfig

import (
	"testing"
	"time"

	"golang.org/x/crypto/ssh"

	"github.com/gpuaas/gpuaas/internal/sshcert"
)

// The render tests (internal/sshconfig) have the same two helpers; these
// serve the tests of Prepare against a real controld's CAs.

func newTestCA(t *testing.T, name string) *sshcert.Authority {
	t.Helper()
	key, err := sshcert.GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	ca, err := sshcert.New(name, key)
	if err != nil {
		t.Fatal(err)
	}
	return ca
}

// hostSigner returns a host certificate from ca for a fresh key, and a
// signer presenting it.
func hostSigner(t *testing.T, ca *sshcert.Authority, principal string) (*ssh.Certificate, ssh.Signer) {
	t.Helper()
	key, err := sshcert.GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	signer, err := ssh.NewSignerFromKey(key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := ca.SignHost(signer.PublicKey(), []string{principal}, time.Hour, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	certSigner, err := ssh.NewCertSigner(cert, signer)
	if err != nil {
		t.Fatal(err)
	}
	return cert, certSigner
}
