package core

import (
	"errors"
	"strings"
	"testing"
	"time"

	gossh "golang.org/x/crypto/ssh"

	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/gateproto"
	"github.com/gpuaas/gpuaas/internal/ids"
	"github.com/gpuaas/gpuaas/internal/sshcert"
	"github.com/gpuaas/gpuaas/internal/sshtest"
)

// TestHostdKeyCallback: how the gateway checks the terminal server's key
// for what controld answered: the key controld has for the node (or a
// certificate of it); without one, only a host certificate of the internal
// CA naming the node. (controld answers with a key whenever it authorizes,
// see TestHostdKey; the rest is the gateway's defence if it did not.)
func TestHostdKeyCallback(t *testing.T) {
	intCA, hostCA := sshtest.NewAuthority(t, api.CAInternal), sshtest.NewAuthority(t, api.CAHost)
	nodeID := ids.New(ids.Node)
	plain := sshtest.NewSigner(t)
	tests := []struct {
		name     string
		serves   gossh.PublicKey // what the terminal server presents
		reported gossh.PublicKey // what controld has for the node
		wantOK   bool
	}{
		{"the reported key", plain.PublicKey(), plain.PublicKey(), true},
		{"another key than the reported one", sshtest.NewSigner(t).PublicKey(), plain.PublicKey(), false},
		{"a certificate of the reported key", mustSignHost(t, intCA, plain, nodeID), plain.PublicKey(), true},
		{"no reported key, plain key", plain.PublicKey(), nil, false},
		{"no reported key, internal CA certificate for the node", certified(t, intCA, nodeID).PublicKey(), nil, true},
		{"no reported key, certificate for another node", certified(t, intCA, ids.New(ids.Node)).PublicKey(), nil, false},
		{"no reported key, host CA certificate", certified(t, hostCA, nodeID).PublicKey(), nil, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			auth := &gateproto.GateAuthorizeResponse{NodeID: nodeID, TerminalAddr: "127.0.0.1:2222"}
			if tt.reported != nil {
				auth.TerminalHostKey = strings.TrimSpace(string(gossh.MarshalAuthorizedKey(tt.reported)))
			}
			err := HostdKeyCallback(auth, intCA.Trusted(), time.Now)(auth.TerminalAddr, nil, tt.serves)
			if (err == nil) != tt.wantOK || (err != nil && !errors.Is(err, ErrHostdKey)) {
				t.Fatalf("got %v; want accepted=%v (refusals ErrHostdKey)", err, tt.wantOK)
			}
		})
	}
}

// certified is a signer of a fresh key with a host certificate from ca
// naming principal.
func certified(t *testing.T, ca *sshcert.Authority, principal string) gossh.Signer {
	t.Helper()
	k := sshtest.NewSigner(t)
	return sshtest.CertSigner(t, mustSignHost(t, ca, k, principal), k)
}

func mustSignHost(t *testing.T, ca *sshcert.Authority, k gossh.Signer, principal string) *gossh.Certificate {
	t.Helper()
	c, err := ca.SignHost(k.PublicKey(), []string{principal}, time.Hour, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	return c
}
