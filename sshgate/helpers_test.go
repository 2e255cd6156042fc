package sshgate

import (
	"context"
	"crypto/ed25519"
	"errors"
	"net"
	"sync"
	"testing"
	"time"

	gossh "golang.org/x/crypto/ssh"

	"github.com/gpuaas/gpuaas/controld/controldtest"
	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/sshcert"
)

func newPrivateKey(t testing.TB) ed25519.PrivateKey {
	t.Helper()
	k, err := sshcert.GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func signerOf(t testing.TB, k ed25519.PrivateKey) gossh.Signer {
	t.Helper()
	s, err := gossh.NewSignerFromKey(k)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func newSigner(t testing.TB) gossh.Signer { return signerOf(t, newPrivateKey(t)) }

func certSigner(t testing.TB, cert *gossh.Certificate, s gossh.Signer) gossh.Signer {
	t.Helper()
	cs, err := gossh.NewCertSigner(cert, s)
	if err != nil {
		t.Fatal(err)
	}
	return cs
}

// run runs command in a new session of c and returns stdout, stderr and
// the exit status (-1 with the error when there is none).
func run(t *testing.T, c *gossh.Client, command string) (stdout, stderr string, status int, err error) {
	t.Helper()
	s, err := c.NewSession()
	if err != nil {
		t.Fatalf("new session: %v", err)
	}
	defer s.Close()
	var out, errOut safeBuffer
	s.Stdout, s.Stderr = &out, &errOut
	err = s.Run(command)
	var exitErr *gossh.ExitError
	switch {
	case err == nil:
		status = 0
	case errors.As(err, &exitErr):
		status, err = exitErr.ExitStatus(), nil
	default:
		status = -1
	}
	return out.String(), errOut.String(), status, err
}

// eventually polls cond until it holds, failing after 20 seconds.
func eventually(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("waited 20s for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// safeBuffer is a bytes.Buffer safe for one writer and concurrent readers.
type safeBuffer struct {
	mu  sync.Mutex
	buf []byte
}

func (b *safeBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.buf = append(b.buf, p...)
	return len(p), nil
}

func (b *safeBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return string(b.buf)
}

// listenEcho serves a TCP echo on loopback, the target of port forwards.
func listenEcho(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				buf := make([]byte, 32<<10)
				for {
					n, err := c.Read(buf)
					if n > 0 {
						if _, werr := c.Write(buf[:n]); werr != nil {
							return
						}
					}
					if err != nil {
						return
					}
				}
			}()
		}
	}()
	return ln.Addr().String()
}

// registeredGatewayKey makes a gateway key and registers it with controld,
// as an admin does with `gpuaas ops gateway-key add`.
func registeredGatewayKey(t testing.TB, ctl *controldtest.Env, name string) ed25519.PrivateKey {
	t.Helper()
	key := newPrivateKey(t)
	line, err := gatewayKeyLine(key)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ctl.Server.RegisterGatewayKey(context.Background(), api.GatewayKeyAddRequest{Name: name, PublicKey: line}, ctl.Admin.ID, false); err != nil {
		t.Fatal(err)
	}
	return key
}
