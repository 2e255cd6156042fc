package sshgate

import (
	"context"
	"crypto/ed25519"
	"errors"
	"io"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/spf13/cobra"
	gossh "golang.org/x/crypto/ssh"

	"github.com/gpuaas/gpuaas/cli/alloc"
	"github.com/gpuaas/gpuaas/cli/auth"
	"github.com/gpuaas/gpuaas/cli/cmdutil"
	"github.com/gpuaas/gpuaas/controld/controldtest"
	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/sshtest"
	"github.com/gpuaas/gpuaas/internal/testutil"
)

func TestConfigCheckAndSetDefaults(t *testing.T) {
	client := &api.Client{}
	gk := make(ed25519.PrivateKey, ed25519.PrivateKeySize)
	tests := []struct {
		name    string
		cfg     Config
		wantErr bool
		want    []string // principals
	}{
		{name: "no listen", cfg: Config{Client: client, HostKeyPath: "k"}, wantErr: true},
		{name: "no client", cfg: Config{Listen: ":22", HostKeyPath: "k"}, wantErr: true},
		{name: "no host key", cfg: Config{Listen: ":22", Client: client}, wantErr: true},
		{name: "bad host key", cfg: Config{Listen: ":22", Client: client, HostKey: ed25519.PrivateKey{1}}, wantErr: true},
		{name: "host key in memory, no gateway key", cfg: Config{Listen: ":22", Client: client, HostKey: make(ed25519.PrivateKey, ed25519.PrivateKeySize)}, wantErr: true},
		{name: "bad gateway key", cfg: Config{Listen: ":22", Client: client, HostKeyPath: "k", GatewayKey: ed25519.PrivateKey{1}}, wantErr: true},
		{name: "no gateway key", cfg: Config{Listen: ":22", Client: client, HostKeyPath: "k"}, wantErr: true},
		{name: "unknown node transport", cfg: Config{Listen: ":22", Client: client, HostKeyPath: "k", GatewayKey: gk, NodeTransport: "tls"}, wantErr: true},
		{name: "advertise wins", cfg: Config{Listen: "10.0.0.1:22", Advertise: "ssh.example.test:22", Client: client, HostKeyPath: "k", GatewayKey: gk},
			want: []string{"ssh.example.test"}},
		{name: "listen host", cfg: Config{Listen: "10.0.0.1:22", Client: client, HostKeyPath: "k", GatewayKey: gk}, want: []string{"10.0.0.1"}},
		{name: "wildcard listen", cfg: Config{Listen: ":22", Client: client, HostKeyPath: "k", GatewayKey: gk}, want: []string{"localhost"}},
		{name: "explicit", cfg: Config{Listen: ":22", Principals: []string{"a", "b"}, Client: client, HostKeyPath: "k", GatewayKey: gk}, want: []string{"a", "b"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.cfg.CheckAndSetDefaults()
			if tt.wantErr {
				if !errors.Is(err, ErrConfig) {
					t.Fatalf("got %v; want ErrConfig", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if strings.Join(tt.cfg.Principals, ",") != strings.Join(tt.want, ",") || tt.cfg.Now == nil || tt.cfg.Log == nil || tt.cfg.NodeTransport != TransportLink {
				t.Fatalf("got principals %q (clock set: %v); want %q and defaults", tt.cfg.Principals, tt.cfg.Now != nil, tt.want)
			}
		})
	}
}

func TestHostKeyFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state", "host_ed25519_key")
	k1, err := loadOrCreateHostKey(path)
	if err != nil {
		t.Fatal(err)
	}
	info, err := os.Stat(path)
	if err != nil || info.Mode().Perm() != 0o600 {
		t.Fatalf("got %v, mode %v; want the key written 0600", err, info.Mode().Perm())
	}
	k2, err := loadOrCreateHostKey(path)
	if err != nil || !k1.Equal(k2) {
		t.Fatalf("got %v, same key %v; want the stored key back", err, k1.Equal(k2))
	}
	if err := os.Chmod(path, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := loadOrCreateHostKey(path); err == nil {
		t.Fatal("got a key from a world-readable file; want it refused")
	}
}

// TestCARotation, through controld's ops.ca_rotate and ops.ca_retire:
// a user CA key controld does not list is refused; after a rotation,
// certificates of the new key and of the old one both work; once the old
// key is retired, its certificates are refused — new connections at the
// handshake, new sessions on a connection opened before at the auth
// re-check.
func TestCARotation(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{config: func(c *Config) { c.RefreshInterval = 20 * time.Millisecond }})
	ctx := context.Background()
	oldUser := e.newUser() // certified by the user CA's first key
	alloc := e.addAlloc(oldUser)
	dial := func(u *user) (*gossh.Client, error) {
		return gossh.Dial("tcp", e.addr, e.clientConfig(alloc, gossh.PublicKeys(u.auth)))
	}

	if c, err := dial(e.userWithCert(sshtest.NewAuthority(t, api.CAUser), oldUser.id)); err == nil {
		c.Close()
		t.Fatal("a user CA key controld does not list: got in; want refused")
	}
	rotated, err := e.admin.CARotate(ctx, api.CARotateRequest{CA: api.CAUser})
	if err != nil {
		t.Fatal(err)
	}
	var oldKey, newKey api.CAKey
	for _, k := range rotated.Keys {
		switch {
		case k.RetiredAt != nil:
		case k.Active:
			newKey = k
		default:
			oldKey = k
		}
	}
	if oldKey.ID == "" || newKey.ID == "" || oldKey.ID != gossh.FingerprintSHA256(oldUser.cert.SignatureKey) {
		t.Fatalf("after the rotation got keys %+v; want the old key (which signed %s) trusted and a new one active",
			rotated.Keys, gossh.FingerprintSHA256(oldUser.cert.SignatureKey))
	}
	newUser := e.relogin(oldUser) // the same user, certified by the new key
	if got := gossh.FingerprintSHA256(newUser.cert.SignatureKey); got != newKey.ID {
		t.Fatalf("certificate after the rotation signed by %s; want the new key %s", got, newKey.ID)
	}
	testutil.Eventually(t, "the new CA key trusted", func() bool {
		c, err := dial(newUser)
		if err == nil {
			c.Close()
		}
		return err == nil
	})
	early, err := dial(oldUser)
	if err != nil {
		t.Fatalf("old CA key during the overlap: %v; want in", err)
	}
	defer early.Close()
	if out, _, status, err := sshtest.Run(t, early, "echo old"); err != nil || status != 0 || out != "old\n" {
		t.Fatalf("old certificate during the overlap: got %q, %d, %v; want it to work", out, status, err)
	}

	if _, err := e.admin.CARetire(ctx, api.CARotateRequest{CA: api.CAUser, KeyID: oldKey.ID}); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, "the old CA key retired", func() bool {
		c, err := dial(oldUser)
		if err == nil {
			c.Close()
		}
		return err != nil
	})
	if _, stderr, status, _ := sshtest.Run(t, early, "echo old"); status != exitGatewayError || !strings.Contains(stderr, "no longer valid") {
		t.Fatalf("new session on a connection of the retired CA key: got status %d, stderr %q; want it refused", status, stderr)
	}
	c, err := dial(newUser)
	if err != nil {
		t.Fatalf("new CA key after the rotation: %v", err)
	}
	c.Close()
}

// sshTree is a small command tree for command mode tests (the real one,
// daemon.SSHCommandTree, imports this package).
func sshTree(f *cmdutil.Factory) *cobra.Command {
	root := &cobra.Command{Use: "gpuaas", SilenceUsage: true, SilenceErrors: true}
	root.PersistentFlags().StringVarP(&f.Flags.Project, "project", "p", "", "Project")
	root.AddCommand(auth.NewCmdWhoami(f, nil), alloc.NewCmdAlloc(f))
	return root
}

// TestCommandMode: ssh gpuaas@gateway <command> runs the command for the
// certificate's user, with the user's own token or, without one, a
// delegated session controld opens for the certificate (gate.user_token).
func TestCommandMode(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{config: func(c *Config) { c.Commands = cmdutil.SSHCommands(sshTree) }})
	u, other := e.newUser(), e.newUser()
	who, err := u.client.Whoami(context.Background())
	if err != nil {
		t.Fatal(err)
	}

	tests := []struct {
		name       string
		sshUser    string
		env        map[string]string
		command    string
		wantStatus int
		wantOut    string
		notOut     string
		wantErr    string
	}{
		{name: "no command", sshUser: CommandUser, wantOut: "Signed in as " + u.id},
		{name: "help needs no API", sshUser: u.id, command: "alloc --help", wantOut: "alloc"},
		{name: "no token: delegated session", sshUser: CommandUser, command: "whoami", wantOut: who.User.Email},
		{name: "no token: as the user", sshUser: CommandUser, command: "whoami --json user", wantOut: u.id},
		{name: "no token: alloc list", sshUser: CommandUser, command: "alloc list -p " + u.project},
		{name: "own token", sshUser: CommandUser, env: map[string]string{envToken: u.token}, command: "whoami --json user",
			wantOut: u.id},
		{name: "another user's token", sshUser: CommandUser, env: map[string]string{envToken: other.token}, command: "whoami",
			wantStatus: cmdutil.ExitForbidden, wantErr: "not your certificate"},
		{name: "login is not served", sshUser: CommandUser, command: "login", wantStatus: 1, wantErr: "unknown command"},
		// Any user name that is not an allocation id gets command mode, as
		// the certificate's user: the name grants nothing.
		{name: "another user's id", sshUser: other.id, command: "whoami --json user", wantOut: u.id, notOut: other.id},
		{name: "the local user name OpenSSH sends", sshUser: "root", command: "whoami --json user", wantOut: u.id},
		{name: "a mistyped allocation id", sshUser: "a-typo", command: "whoami", wantStatus: exitGatewayError, wantErr: "not an allocation id"},
		// -p/--project reaches the API as it does locally (it was dropped:
		// the request went without a project).
		{name: "-p reaches the API", sshUser: CommandUser, command: "alloc create --sku h200-slice --gpus 1 --dry-run -p ghost",
			wantStatus: cmdutil.ExitNotFound, wantErr: `project "ghost" not found`},
		{name: "--project reaches the API", sshUser: CommandUser, command: "alloc list --project ghost",
			wantStatus: cmdutil.ExitNotFound, wantErr: `project "ghost" not found`},
		// whoami reports the server the gateway really talks to (it said
		// the built-in default), and the user's default project.
		{name: "whoami: the real server", sshUser: CommandUser, command: "whoami",
			wantOut: "server\t" + e.client.Conn().ConnectedUrlRedacted() + "\nproject\t" + u.project + "\n"},
		// Over SSH the environment is the session's: GPUAAS_PROJECT as sent.
		{name: "GPUAAS_PROJECT from the session", sshUser: CommandUser, env: map[string]string{envProject: "ghost"},
			command: "alloc list", wantStatus: cmdutil.ExitNotFound, wantErr: `project "ghost" not found`},
	}
	c := e.dial(u, CommandUser)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			conn := c
			if tt.sshUser != CommandUser {
				conn = e.dial(u, tt.sshUser)
			}
			s, err := conn.NewSession()
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			for k, v := range tt.env {
				if err := s.Setenv(k, v); err != nil {
					t.Fatal(err)
				}
			}
			var out, errOut sshtest.Buffer
			s.Stdout, s.Stderr = &out, &errOut
			if tt.command == "" {
				err = s.Shell()
				if err == nil {
					err = s.Wait()
				}
			} else {
				err = s.Run(tt.command)
			}
			status := 0
			var exitErr *gossh.ExitError
			if errors.As(err, &exitErr) {
				status = exitErr.ExitStatus()
			} else if err != nil {
				t.Fatal(err)
			}
			if status != tt.wantStatus || !strings.Contains(out.String(), tt.wantOut) || !strings.Contains(errOut.String(), tt.wantErr) ||
				tt.notOut != "" && strings.Contains(out.String(), tt.notOut) {
				t.Fatalf("got status %d, stdout %q, stderr %q; want %d, stdout with %q, stderr with %q",
					status, out.String(), errOut.String(), tt.wantStatus, tt.wantOut, tt.wantErr)
			}
		})
	}
	if got := e.authorizedUsers(); len(got) != 0 {
		t.Fatalf("command mode asked gate.authorize for %q; want nothing", got)
	}
}

// TestBackpressure: a command that writes as fast as it can, to a client
// that does not read, is held back by flow control: the node stops being
// able to write after a few windows, and gateway memory stays bounded
// while a lot flows once the client reads.
func TestBackpressure(t *testing.T) {
	// Not parallel: it measures the process's heap.
	e := newEnv(t, envOptions{})
	u := e.newUser()
	c := e.dial(u, e.addAlloc(u))
	s, err := c.NewSession()
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	stdout, err := s.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Start("cat /dev/zero"); err != nil {
		t.Fatal(err)
	}
	// Not reading: production must stall.
	var last int64 = -1
	testutil.Eventually(t, "the node's output to stall", func() bool {
		time.Sleep(200 * time.Millisecond)
		n := e.hostd.produced.Load()
		stalled := n == last && n > 0
		last = n
		return stalled
	})
	const maxBuffered = 16 << 20 // a few 2 MiB windows and pipe buffers
	if last > maxBuffered {
		t.Fatalf("the node wrote %d bytes to a client that read nothing; want at most %d", last, maxBuffered)
	}

	// Now read 256 MiB while watching the heap.
	const total = 256 << 20
	peak := make(chan uint64, 1)
	stop := make(chan struct{})
	go func() {
		var max uint64
		var ms runtime.MemStats
		for {
			select {
			case <-stop:
				peak <- max
				return
			case <-time.After(20 * time.Millisecond):
			}
			runtime.ReadMemStats(&ms)
			max = maxU(max, ms.HeapInuse)
		}
	}()
	if _, err := io.CopyN(io.Discard, stdout, total); err != nil {
		t.Fatal(err)
	}
	close(stop)
	if p := <-peak; p > 128<<20 {
		t.Fatalf("heap in use peaked at %d MiB while %d MiB flowed; want it bounded", p>>20, total>>20)
	}
}

func maxU(a, b uint64) uint64 {
	if a > b {
		return a
	}
	return b
}

// TestRecordingCap: a PTY session that outputs more than the cap is
// recorded up to the cap, marked cut, and the client still gets it all.
func TestRecordingCap(t *testing.T) {
	t.Parallel()
	const limit = 64 << 10
	e := newEnv(t, envOptions{config: func(c *Config) { c.MaxRecordingBytes = limit }})
	u := e.newUser()
	c := e.dial(u, e.addAlloc(u))
	s, err := c.NewSession()
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := s.RequestPty("xterm", 24, 80, nil); err != nil {
		t.Fatal(err)
	}
	var out sshtest.Buffer
	s.Stdout = &out
	if err := s.Run("head -c 1000000 /dev/zero | tr '\\0' a"); err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(out.String(), "a"); n != 1000000 {
		t.Fatalf("client got %d bytes of output; want 1000000", n)
	}
	ts := e.endedSession(t, api.SessionExec, "")
	cast := fetchRecording(t, e, ts.Recording)
	if len(cast.output) != limit || len(cast.markers) != 1 {
		t.Fatalf("got %d recorded bytes, markers %q; want %d and one marker", len(cast.output), cast.markers, limit)
	}
}

// TestAbruptDisconnect: clients that vanish mid-session leave nothing
// behind in the gateway — the goroutine count returns to where it was.
func TestAbruptDisconnect(t *testing.T) {
	// Not parallel: it counts the process's goroutines.
	e := newEnv(t, envOptions{})
	u := e.newUser()
	alloc := e.addAlloc(u)
	// Warm up (first connection pins, starts pools).
	if _, _, status, err := sshtest.Run(t, e.dial(u, alloc), "true"); err != nil || status != 0 {
		t.Fatalf("warm-up: %d, %v", status, err)
	}
	e.endedSession(t, api.SessionExec, "true")
	runtime.GC()
	base := runtime.NumGoroutine()

	const n = 20
	for range n {
		c, err := gossh.Dial("tcp", e.addr, e.clientConfig(alloc, gossh.PublicKeys(u.auth)))
		if err != nil {
			t.Fatal(err)
		}
		s, err := c.NewSession()
		if err != nil {
			t.Fatal(err)
		}
		if err := s.RequestPty("xterm", 24, 80, nil); err != nil {
			t.Fatal(err)
		}
		if _, err := s.StdinPipe(); err != nil { // open, never closed
			t.Fatal(err)
		}
		var out sshtest.Buffer
		s.Stdout = &out
		if err := s.Start("echo up; cat"); err != nil {
			t.Fatal(err)
		}
		testutil.Eventually(t, "the session up", func() bool { return strings.Contains(out.String(), "up") })
		c.Close() // the TCP connection, without closing the channel
	}
	deadline := time.Now().Add(20 * time.Second)
	for runtime.NumGoroutine() > base+5 {
		if time.Now().After(deadline) {
			buf := make([]byte, 1<<20)
			t.Fatalf("got %d goroutines 20s after %d clients vanished; want at most %d:\n%s",
				runtime.NumGoroutine(), n, base+5, buf[:runtime.Stack(buf, true)])
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestHandshakeTimeout: a connection that never authenticates is dropped;
// one that did is not.
func TestHandshakeTimeout(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{config: func(c *Config) { c.HandshakeTimeout = 300 * time.Millisecond }})
	raw, err := net.Dial("tcp", e.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	_ = raw.SetReadDeadline(time.Now().Add(20 * time.Second))
	if _, err := io.Copy(io.Discard, raw); err != nil {
		t.Fatalf("idle unauthenticated connection: got %v; want the gateway to close it", err)
	}
	u := e.newUser()
	c := e.dial(u, e.addAlloc(u))
	time.Sleep(600 * time.Millisecond) // past the handshake timeout
	if out, _, status, err := sshtest.Run(t, c, "echo still"); err != nil || status != 0 || out != "still\n" {
		t.Fatalf("authenticated connection after the handshake timeout: got %q, %d, %v; want it alive", out, status, err)
	}
}

func TestHostCertDue(t *testing.T) {
	ca, other := sshtest.NewAuthority(t, api.CAHost), sshtest.NewAuthority(t, api.CAHost)
	k := sshtest.NewSigner(t)
	issued := time.Now()
	c, err := ca.SignHost(k.PublicKey(), []string{"gw"}, 30*24*time.Hour, issued)
	if err != nil {
		t.Fatal(err)
	}
	h := &hostCert{cert: c}
	tests := []struct {
		name  string
		at    time.Time
		trust []gossh.PublicKey
		want  bool
	}{
		{"fresh", issued.Add(time.Hour), ca.Trusted(), false},
		{"half way", issued.Add(15 * 24 * time.Hour), ca.Trusted(), false},
		{"two thirds", issued.Add(20*24*time.Hour + time.Hour), ca.Trusted(), true},
		{"CA retired", issued.Add(time.Hour), other.Trusted(), true},
		{"CA list unknown", issued.Add(time.Hour), nil, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := h.due(tt.at, tt.trust); got != tt.want {
				t.Fatalf("due = %v; want %v", got, tt.want)
			}
		})
	}
}

// TestHostCertRenewed: the refresh renews a host certificate that is due
// and serves the new one.
func TestHostCertRenewed(t *testing.T) {
	t.Parallel()
	clock := time.Now()
	var mu sync.Mutex
	now := func() time.Time { mu.Lock(); defer mu.Unlock(); return clock }
	e := newEnv(t, envOptions{config: func(c *Config) { c.Now = now; c.RefreshInterval = 20 * time.Millisecond }})
	// The host certificate served, read from the handshake (which then stops).
	served := func() uint64 {
		var serial uint64
		cfg := e.clientConfig(CommandUser)
		cfg.HostKeyCallback = func(_ string, _ net.Addr, key gossh.PublicKey) error {
			if c, ok := key.(*gossh.Certificate); ok {
				serial = c.Serial
			}
			return errors.New("seen")
		}
		_, _ = gossh.Dial("tcp", e.addr, cfg)
		return serial
	}
	first := served()
	if first == 0 {
		t.Fatal("got no host certificate served; want one")
	}
	mu.Lock()
	clock = clock.Add(25 * 24 * time.Hour)
	mu.Unlock()
	testutil.Eventually(t, "the renewed certificate served", func() bool {
		s := served()
		return s != 0 && s != first
	})
}

// TestRunFails: a gateway that cannot get what it needs from controld
// does not start: without a token, or with one that is not a gateway's,
// controld signs it no host certificate; with no controld, nothing
// answers at all.
func TestRunFails(t *testing.T) {
	t.Parallel()
	ctl := controldtest.Start(t, controldtest.Options{NoNodes: true})
	_, userToken := ctl.AddUser(t, "user@example.test", api.RoleUser)
	tests := []struct {
		name   string
		client *api.Client
		want   error
	}{
		{"no token", ctl.AnonClient(), api.ErrUnauthenticated},
		{"a user's token", ctl.AnonClient().With(api.WithToken(userToken)), api.ErrForbidden},
		{"an admin's token", ctl.AnonClient().With(api.WithToken(ctl.AdminToken)), api.ErrForbidden},
		{"no controld", api.NewClient(testutil.NATS(t).Connect(t)), api.ErrUnavailable},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			gw, err := New(Config{Listen: "127.0.0.1:0", HostKey: sshtest.NewKey(t), GatewayKey: sshtest.NewKey(t),
				Client: tt.client, Log: testutil.Logger(t)})
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			if err := gw.Run(ctx); !errors.Is(err, tt.want) {
				t.Fatalf("got %v; want %v", err, tt.want)
			}
			select {
			case <-gw.Ready():
				t.Fatal("the gateway got ready; want it never to serve")
			default:
			}
		})
	}
}
