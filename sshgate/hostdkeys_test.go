package sshgate

import (
	"strings"
	"testing"
	"time"

	gossh "golang.org/x/crypto/ssh"

	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/sshcert"
	"github.com/gpuaas/gpuaas/internal/sshtest"
)

// TestHostdKey: the gateway hands a session only to the terminal server
// presenting the host key controld has for the node (hostd reported it,
// signed). controld itself refuses to authorize a node that reported no
// key, so the gateway never dials one. Never trust on first use.
func TestHostdKey(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{})
	u := e.newUser()
	alloc := e.addAlloc(u)
	intCA, hostCA := e.authority(api.CAInternal), e.authority(api.CAHost)
	plain := sshtest.NewSigner(t)
	tests := []struct {
		name     string
		serves   gossh.Signer    // what the terminal server presents
		reported gossh.PublicKey // what controld has for the node
		wantOK   bool
		wantErr  string // what the user is told when refused
	}{
		{"the reported key", plain, plain.PublicKey(), true, ""},
		{"another key than the reported one", sshtest.NewSigner(t), plain.PublicKey(), false, "cannot reach"},
		{"a certificate of the reported key", sshtest.CertSigner(t, mustSignHost(t, intCA, plain, e.node), plain), plain.PublicKey(), true, ""},
		{"a host CA certificate of another key", certified(t, hostCA, e.node), plain.PublicKey(), false, "cannot reach"},
		{"no reported key, plain key", plain, nil, false, "serves no terminal"},
		{"no reported key, internal CA certificate for the node", certified(t, intCA, e.node), nil, false, "serves no terminal"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := startTestHostd(t, e.node, e.internalCA, tt.serves)
			e.setTerminal(h.addr, tt.reported)
			out, stderr, status, err := sshtest.Run(t, e.dial(u, alloc), "echo in")
			if got := err == nil && status == 0 && out == "in\n"; got != tt.wantOK {
				t.Fatalf("got %q, %q, status %d, %v; want served=%v", out, stderr, status, err, tt.wantOK)
			}
			if !tt.wantOK && (status != exitGatewayError || !strings.Contains(stderr, tt.wantErr)) {
				t.Fatalf("got status %d, stderr %q; want %d and the user told %q", status, stderr, exitGatewayError, tt.wantErr)
			}
			h.mu.Lock()
			served := len(h.users)
			h.mu.Unlock()
			if served > 0 != tt.wantOK {
				t.Fatalf("the terminal server served %d sessions; want served=%v", served, tt.wantOK)
			}
		})
	}
}

func mustSignHost(t *testing.T, ca *sshcert.Authority, k gossh.Signer, principal string) *gossh.Certificate {
	t.Helper()
	c, err := ca.SignHost(k.PublicKey(), []string{principal}, time.Hour, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// certified is a signer of a fresh key with a host certificate from ca
// naming principal.
func certified(t *testing.T, ca *sshcert.Authority, principal string) gossh.Signer {
	t.Helper()
	k := sshtest.NewSigner(t)
	return sshtest.CertSigner(t, mustSignHost(t, ca, k, principal), k)
}
