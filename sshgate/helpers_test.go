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

	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/ids"
	"github.com/gpuaas/gpuaas/internal/sshcert"
	"github.com/gpuaas/gpuaas/internal/testutil"
)

// env is a gateway wired to a real NATS server, the fake controld and a
// real SSH server standing in for hostd.
type env struct {
	t      testing.TB
	ctl    *fakeControld
	hostd  *testHostd
	gw     *Gateway
	addr   string // the gateway's address
	client *api.Client
	cancel context.CancelFunc
	done   chan error
}

type envOptions struct {
	// hostdKey is the test hostd's host key (default: a fresh plain key).
	hostdKey gossh.Signer
	// config adjusts the gateway's Config before New.
	config func(*Config)
}

func newEnv(t testing.TB, opts envOptions) *env {
	t.Helper()
	nc := testutil.Connect(t, testutil.NATS(t))
	e := &env{t: t, ctl: newFakeControld(t, nc), client: api.NewClient(nc, api.WithToken("gateway-token"))}
	hostdKey := opts.hostdKey
	if hostdKey == nil {
		hostdKey = newSigner(t)
	}
	e.hostd = startTestHostd(t, e.ctl.node, e.ctl.intCA.Trusted(), hostdKey)
	e.ctl.setNode(e.ctl.node, e.hostd.addr, hostdKey.PublicKey())

	cfg := Config{
		Listen:       "127.0.0.1:0",
		HostKey:      newPrivateKey(t),
		Client:       e.client,
		RecordingDir: t.TempDir(),
		Log:          testutil.Logger(t),
	}
	if opts.config != nil {
		opts.config(&cfg)
	}
	gw, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	e.gw = gw
	ctx, cancel := context.WithCancel(context.Background())
	e.cancel, e.done = cancel, make(chan error, 1)
	go func() { e.done <- gw.Run(ctx) }()
	select {
	case <-gw.Ready():
	case err := <-e.done:
		t.Fatalf("gateway Run: %v", err)
	case <-time.After(20 * time.Second):
		t.Fatal("gateway not ready after 20s")
	}
	e.addr = gw.Addr().String()
	t.Cleanup(e.stop)
	return e
}

// stop ends Run and checks it returned cleanly.
func (e *env) stop() {
	e.cancel()
	select {
	case err := <-e.done:
		if err != nil {
			e.t.Errorf("gateway Run returned %v; want nil", err)
		}
	case <-time.After(30 * time.Second):
		e.t.Error("gateway Run did not return 30s after its context ended")
	}
}

// user is a gpuaas user with a key and a certificate from the user CA.
type user struct {
	id     string
	key    ed25519.PrivateKey
	signer gossh.Signer
	cert   *gossh.Certificate
	auth   gossh.Signer // the certificate signer
}

func (e *env) newUser() *user {
	e.t.Helper()
	return e.userWithCert(e.ctl.userCA, ids.New(ids.User))
}

func (e *env) userWithCert(ca *sshcert.Authority, id string) *user {
	e.t.Helper()
	u := &user{id: id, key: newPrivateKey(e.t)}
	u.signer = signerOf(e.t, u.key)
	cert, err := ca.SignUser(u.signer.PublicKey(), sshcert.UserCert{UserID: id, KeyID: id + "@example.test", MaxTTL: time.Hour}, time.Now())
	if err != nil {
		e.t.Fatal(err)
	}
	u.cert = cert
	u.auth = certSigner(e.t, cert, u.signer)
	return u
}

// clientConfig authenticates as user with auth, and accepts only the
// gateway's host certificate from the host CA.
func (e *env) clientConfig(sshUser string, auth ...gossh.AuthMethod) *gossh.ClientConfig {
	return &gossh.ClientConfig{
		User:            sshUser,
		Auth:            auth,
		HostKeyCallback: sshcert.HostKeyCallback(e.ctl.hostCA.Trusted(), time.Now),
		Timeout:         10 * time.Second,
	}
}

// dial connects to the gateway as u, user name sshUser.
func (e *env) dial(u *user, sshUser string) *gossh.Client {
	e.t.Helper()
	c, err := gossh.Dial("tcp", e.addr, e.clientConfig(sshUser, gossh.PublicKeys(u.auth)))
	if err != nil {
		e.t.Fatalf("dial gateway as %s@%s: %v", u.id, sshUser, err)
	}
	e.t.Cleanup(func() { _ = c.Close() })
	return c
}

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
