package sshgate

import (
	"context"
	"errors"
	"io"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/pkg/sftp"
	gossh "golang.org/x/crypto/ssh"

	"github.com/gpuaas/gpuaas/cli/cmdutil"
	"github.com/gpuaas/gpuaas/internal/gateproto"
	"github.com/gpuaas/gpuaas/internal/sshcert"
	"github.com/gpuaas/gpuaas/internal/sshtest"
	"github.com/gpuaas/gpuaas/internal/testutil"
)

// revocationDeadline is how soon after a logout its open SSH sessions
// must have ended.
const revocationDeadline = 5 * time.Second

// shell is an interactive PTY shell through the gateway.
type shell struct {
	t      *testing.T
	s      *gossh.Session
	in     io.WriteCloser
	out    sshtest.Buffer
	errOut sshtest.Buffer
	done   chan error // Wait's result
}

func openShell(t *testing.T, c *gossh.Client) *shell {
	t.Helper()
	s, err := c.NewSession()
	if err != nil {
		t.Fatal(err)
	}
	sh := &shell{t: t, s: s, done: make(chan error, 1)}
	s.Stdout, s.Stderr = &sh.out, &sh.errOut
	if sh.in, err = s.StdinPipe(); err != nil {
		t.Fatal(err)
	}
	if err := s.RequestPty("xterm", 24, 80, nil); err != nil {
		t.Fatal(err)
	}
	if err := s.Shell(); err != nil {
		t.Fatal(err)
	}
	go func() { sh.done <- s.Wait() }()
	sh.expectLive()
	return sh
}

// expectLive has the shell compute something and waits for the answer.
func (sh *shell) expectLive() {
	sh.t.Helper()
	marker := "live-" + time.Now().Format("150405.000000")
	if _, err := io.WriteString(sh.in, "echo "+marker+"-$((6*7))\n"); err != nil {
		sh.t.Fatalf("shell input: %v", err)
	}
	testutil.Eventually(sh.t, "the shell to answer", func() bool { return strings.Contains(sh.out.String(), marker+"-42") })
}

// waitEnded waits until the shell's session has ended, failing when that
// takes longer than within; it returns how long it took from since and
// the exit error.
func (sh *shell) waitEnded(since time.Time, within time.Duration) (time.Duration, error) {
	sh.t.Helper()
	select {
	case err := <-sh.done:
		return time.Since(since), err
	case <-time.After(time.Until(since.Add(within))):
		sh.t.Fatalf("the shell was still open %s after the login ended; output %q, stderr %q", within, sh.out.String(), sh.errOut.String())
		return 0, nil
	}
}

// wantLoginEndedExit checks how a session of an ended login ended: exit
// status 255 and the reason on stderr.
func wantLoginEndedExit(t *testing.T, err error, stderr, reason string) {
	t.Helper()
	var exitErr *gossh.ExitError
	if !errors.As(err, &exitErr) || exitErr.ExitStatus() != exitGatewayError || !strings.Contains(stderr, reason) ||
		!strings.Contains(stderr, "gpuaas login") {
		t.Fatalf("got %v, stderr %q; want exit %d with %q and a hint to log in", err, stderr, exitGatewayError, reason)
	}
}

// TestEndedLoginRefusedAtConnect: after `gpuaas logout`, a copy of the
// session's certificate still passes the handshake (it is in its window,
// from a trusted CA) but opens nothing: no shell or exec on the
// allocation, no command over SSH, no port forward — each told why. The
// same user's other login keeps working.
func TestEndedLoginRefusedAtConnect(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{config: func(c *Config) { c.Commands = cmdutil.SSHCommands(sshTree) }})
	ctx := context.Background()
	u := e.newUser()
	alloc := e.addAlloc(u)
	other := e.newLogin(u)
	first := e.dial(u, alloc)
	if out, _, status, err := sshtest.Run(t, first, "echo before"); err != nil || status != 0 || out != "before\n" {
		t.Fatalf("before logout: got %q, %d, %v; want in", out, status, err)
	}
	closed := make(chan struct{})
	go func() { _ = first.Wait(); close(closed) }()
	if _, err := u.client.Logout(ctx); err != nil {
		t.Fatal(err)
	}
	// The gateway has heard of the logout once it closed the login's open
	// connection; from then on new connections meet the refusal at connect.
	select {
	case <-closed:
	case <-time.After(revocationDeadline):
		t.Fatal("the gateway kept the logged-out login's connection open")
	}

	_, stderr, status, err := sshtest.Run(t, e.dial(u, alloc), "echo in")
	if err != nil || status != exitGatewayError || !strings.Contains(stderr, "this login was ended (logged out / disabled); run `gpuaas login`") {
		t.Fatalf("exec with the logged-out certificate: got %q, %d, %v; want refused, told to log in", stderr, status, err)
	}
	_, stderr, status, err = sshtest.Run(t, e.dial(u, CommandUser), "whoami")
	if err != nil || status != exitGatewayError || !strings.Contains(stderr, "your login was ended") {
		t.Fatalf("command with the logged-out certificate: got %q, %d, %v; want refused", stderr, status, err)
	}
	if conn, err := e.dial(u, alloc).Dial("tcp", sshtest.ListenEcho(t)); err == nil {
		conn.Close()
		t.Fatal("port forward with the logged-out certificate: opened; want refused")
	} else if !strings.Contains(err.Error(), "this login was ended") {
		t.Fatalf("port forward with the logged-out certificate: got %v; want refused as ended", err)
	}

	if out, _, status, err := sshtest.Run(t, e.dial(other, alloc), "echo other"); err != nil || status != 0 || out != "other\n" {
		t.Fatalf("the user's other login: got %q, %d, %v; want in", out, status, err)
	}
	if out, _, status, err := sshtest.Run(t, e.dial(other, CommandUser), "whoami --json user"); err != nil || status != 0 || !strings.Contains(out, u.id) {
		t.Fatalf("the user's other login, command mode: got %q, %d, %v; want in", out, status, err)
	}
}

// TestLogoutEndsOpenSessions: logging out ends, within seconds, every open
// session of connections authenticated with that login's certificate —
// an interactive shell (told why on its terminal), an exec, sftp and a
// port forward — and only those: the same user's other login is
// untouched. The periodic re-check is off here: the announcement does it.
func TestLogoutEndsOpenSessions(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{config: func(c *Config) { c.RevocationCheckInterval = time.Hour }})
	ctx := context.Background()
	u := e.newUser()
	alloc := e.addAlloc(u)
	other := e.newLogin(u)

	c := e.dial(u, alloc)
	sh := openShell(t, c)
	ex, err := c.NewSession()
	if err != nil {
		t.Fatal(err)
	}
	var exErr sshtest.Buffer
	ex.Stderr = &exErr
	exIn, _ := ex.StdinPipe() // held open: cat runs until the session ends
	if err := ex.Start("cat"); err != nil {
		t.Fatal(err)
	}
	exDone := make(chan error, 1)
	go func() { exDone <- ex.Wait() }()
	sc, err := sftp.NewClient(c)
	if err != nil {
		t.Fatal(err)
	}
	defer sc.Close()
	if _, err := sc.Getwd(); err != nil {
		t.Fatal(err)
	}
	fwd, err := c.Dial("tcp", sshtest.ListenEcho(t))
	if err != nil {
		t.Fatal(err)
	}
	defer fwd.Close()
	otherShell := openShell(t, e.dial(other, alloc))

	start := time.Now()
	if _, err := u.client.Logout(ctx); err != nil {
		t.Fatal(err)
	}
	took, err := sh.waitEnded(start, revocationDeadline)
	t.Logf("the shell ended %s after logout", took.Round(time.Millisecond))
	wantLoginEndedExit(t, err, sh.errOut.String(), "your login was ended (logged out / disabled)")

	select {
	case err := <-exDone:
		wantLoginEndedExit(t, err, exErr.String(), "your login was ended")
	case <-time.After(revocationDeadline):
		t.Fatal("the exec session outlived the login")
	}
	_ = exIn.Close()
	// Then the whole connection, and with it sftp and the forward.
	connDone := make(chan error, 1)
	go func() { connDone <- c.Wait() }()
	select {
	case <-connDone:
		t.Logf("the connection was closed %s after logout", time.Since(start).Round(time.Millisecond))
	case <-time.After(time.Until(start.Add(revocationDeadline))):
		t.Fatal("the gateway kept the connection of an ended login open")
	}
	if _, err := sc.Getwd(); err == nil {
		t.Error("sftp still answers after the login ended")
	}
	_ = fwd.SetDeadline(time.Now().Add(revocationDeadline))
	if _, err := fwd.Write([]byte("x")); err == nil {
		if _, err := io.ReadFull(fwd, make([]byte, 1)); err == nil {
			t.Error("the port forward still carries data after the login ended")
		}
	}

	otherShell.expectLive()
	if e.gw.core.LoginRefs(nil)[0].SessionID != other.cert.Extensions[sshcert.ExtensionSessionID] {
		t.Errorf("open logins %+v; want only the other one", e.gw.core.LoginRefs(nil))
	}
}

// TestEndedLoginsRechecked: a login that ends without an announcement
// reaching the gateway — a missed message, or expiry, which is never
// announced — is caught by the periodic re-check of open logins.
func TestEndedLoginsRechecked(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{config: func(c *Config) { c.RevocationCheckInterval = 200 * time.Millisecond }})
	ctx := context.Background()
	u := e.newUser()
	alloc := e.addAlloc(u)
	second := e.newLogin(u)
	third := e.newLogin(u)
	revoked, expired, live := openShell(t, e.dial(u, alloc)), openShell(t, e.dial(second, alloc)), openShell(t, e.dial(third, alloc))

	setSession := func(set string, who *user) {
		t.Helper()
		if _, err := e.ctl.Server.Pool().Exec(ctx, `UPDATE sessions SET `+set+` WHERE id = $1`,
			who.cert.Extensions[sshcert.ExtensionSessionID]); err != nil {
			t.Fatal(err)
		}
	}
	// Revoked in the database with no event: as if the announcement was
	// lost.
	start := time.Now()
	setSession("revoked_at = now()", u)
	took, err := revoked.waitEnded(start, revocationDeadline)
	t.Logf("revoked without an announcement: the shell ended after %s", took.Round(time.Millisecond))
	wantLoginEndedExit(t, err, revoked.errOut.String(), "your login was ended")

	start = time.Now()
	setSession("expires_at = now() - interval '1 second'", second)
	took, err = expired.waitEnded(start, revocationDeadline)
	t.Logf("expired: the shell ended after %s", took.Round(time.Millisecond))
	wantLoginEndedExit(t, err, expired.errOut.String(), "your login has expired")

	live.expectLive()
}

// TestRevocationMissedWhileDisconnected: the gateway's NATS connection is
// down when the user logs out, so the announcement never reaches it; the
// re-check it makes on reconnecting ends the session (the periodic one is
// off here).
func TestRevocationMissedWhileDisconnected(t *testing.T) {
	t.Parallel()
	var proxy *testutil.TCPProxy
	var gwNC *nats.Conn
	e := newEnv(t, envOptions{
		config: func(c *Config) { c.RevocationCheckInterval = time.Hour },
		gatewayNATS: func(url string, opts ...nats.Option) *nats.Conn {
			proxy = testutil.StartTCPProxy(t, strings.TrimPrefix(url, "nats://"))
			gwNC = testutil.Connect(t, "nats://"+proxy.Addr(), append(opts, nats.ReconnectWait(20*time.Millisecond),
				nats.ReconnectJitter(0, 0))...)
			return gwNC
		},
	})
	ctx := context.Background()
	u := e.newUser()
	alloc := e.addAlloc(u)
	sh := openShell(t, e.dial(u, alloc))

	announced := make(chan *nats.Msg, 1)
	if _, err := e.ctl.NC.ChanSubscribe(gateproto.GateRevokedSubject, announced); err != nil {
		t.Fatal(err)
	}
	if err := e.ctl.NC.Flush(); err != nil {
		t.Fatal(err)
	}
	proxy.SetCut(true)
	testutil.Eventually(t, "the gateway to lose NATS", func() bool { return gwNC.Status() != nats.CONNECTED })
	if _, err := u.client.Logout(ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case <-announced: // sent while the gateway could not hear it
	case <-time.After(revocationDeadline):
		t.Fatal("the revocation was not announced")
	}
	sh.expectLive() // the SSH path does not need NATS: still open
	start := time.Now()
	proxy.SetCut(false)
	took, err := sh.waitEnded(start, revocationDeadline)
	t.Logf("the shell ended %s after NATS came back", took.Round(time.Millisecond))
	wantLoginEndedExit(t, err, sh.errOut.String(), "your login was ended")
}

// TestOpenSSHLogout: with the OpenSSH client, a session open at logout
// ends with the reason on the terminal, and the copy of the certificate
// is refused afterwards.
func TestOpenSSHLogout(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{})
	u := e.newUser()
	alloc := e.addAlloc(u)
	o := newOpenSSH(t, e, u)
	target := alloc + "@127.0.0.1"

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "ssh", append(append([]string{}, o.args...), "-p", o.port, "-tt", target)...)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	var out, errOut sshtest.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	if _, err := io.WriteString(stdin, "echo open-$((6*7))\n"); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, "the OpenSSH shell to answer", func() bool { return strings.Contains(out.String(), "open-42") })

	start := time.Now()
	if _, err := u.client.Logout(ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		t.Logf("ssh exited %s after logout", time.Since(start).Round(time.Millisecond))
		var exitErr *exec.ExitError
		all := out.String() + errOut.String()
		if !errors.As(err, &exitErr) || exitErr.ExitCode() != exitGatewayError || !strings.Contains(all, "your login was ended") {
			t.Fatalf("ssh: got %v, output %q; want exit 255 with the reason", err, all)
		}
	case <-time.After(revocationDeadline):
		t.Fatalf("ssh still running %s after logout; output %q", revocationDeadline, out.String()+errOut.String())
	}
	_ = stdin.Close()

	if _, stderr, code := o.run(nil, "ssh", target, "echo in"); code != exitGatewayError || !strings.Contains(stderr, "this login was ended") {
		t.Fatalf("the logged-out certificate: got exit %d, stderr %q; want refused", code, stderr)
	}
}
