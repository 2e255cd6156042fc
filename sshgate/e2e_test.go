package sshgate

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/pkg/sftp"
	gossh "golang.org/x/crypto/ssh"

	"github.com/gpuaas/gpuaas/controld"
	"github.com/gpuaas/gpuaas/controld/controldtest"
	"github.com/gpuaas/gpuaas/hostd/agent"
	"github.com/gpuaas/gpuaas/hostd/sim"
	"github.com/gpuaas/gpuaas/hostd/tasks"
	"github.com/gpuaas/gpuaas/hostd/term"
	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/sshcert"
	"github.com/gpuaas/gpuaas/internal/sshtest"
	"github.com/gpuaas/gpuaas/internal/testutil"
)

// realStack is the gateway in front of the real thing: controld (real
// Postgres and NATS), and sim hosts enrolled by real hostd agents, each
// with hostd's terminal server (hostd/term) on loopback.
type realStack struct {
	t      testing.TB
	env    *controldtest.Env
	admin  *api.Client
	gw     *Gateway
	addr   string
	hostCA []gossh.PublicKey
	log    *slog.Logger
}

// startRealStack starts it; the gateway and the hosts log to log, or
// through t.Log when it is nil.
func startRealStack(t testing.TB, log *slog.Logger) *realStack {
	t.Helper()
	if log == nil {
		log = testutil.Logger(t)
	}
	ctx := context.Background()
	env := controldtest.Start(t, controldtest.Options{NoNodes: true,
		Hosts: controld.HostsConfig{HeartbeatInterval: 200 * time.Millisecond, AutoApproveSlots: true}})
	s := &realStack{t: t, env: env, admin: env.Client(env.AdminToken), log: log}
	for _, h := range []struct {
		name, shape string
		profile     sim.Profile
	}{
		{"metal-1", api.ShapeBaremetal, sim.H100Baremetal8()},
		{"slice-1", api.ShapeGPUSlice, sim.H200Slice8()},
	} {
		s.startHost(ctx, h.name, h.shape, h.profile)
	}
	testutil.Eventually(t, "both sim hosts ready", func() bool {
		nodes, err := env.Server.Nodes(ctx)
		ready := 0
		for _, n := range nodes {
			if n.State == api.NodeReady && n.SlotsTotal > 0 {
				ready++
			}
		}
		return err == nil && ready == 2
	})

	s.gw = s.startGateway("gw-test", TransportLink)
	s.addr = s.gw.Addr().String()
	cas, err := s.admin.SSHCAs(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if s.hostCA, err = sshcert.ParseTrusted([]byte(strings.Join(cas.Host, "\n"))); err != nil {
		t.Fatal(err)
	}
	return s
}

// startGateway starts a gateway registered as name that reaches the
// nodes over transport.
func (s *realStack) startGateway(name, transport string) *Gateway {
	t := s.t
	gwClient, gwKey := s.env.Gateway(t, name)
	gw, err := New(Config{Listen: "127.0.0.1:0", HostKey: sshtest.NewKey(t), Client: gwClient,
		GatewayKey: gwKey, RecordingDir: t.TempDir(), Name: name, NodeTransport: transport, Log: s.log.With("gateway", name)})
	if err != nil {
		t.Fatal(err)
	}
	runCtx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- gw.Run(runCtx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("gateway %s: %v", name, err)
		}
	})
	select {
	case <-gw.Ready():
	case err := <-done:
		t.Fatalf("gateway %s: %v", name, err)
	case <-time.After(30 * time.Second):
		t.Fatalf("gateway %s not ready", name)
	}
	return gw
}

// startHost enrolls a sim host with its terminal server, as `gpuaas dev`
// does.
func (s *realStack) startHost(ctx context.Context, name, shape string, profile sim.Profile) {
	t := s.t
	dir := t.TempDir()
	tok, err := s.env.Server.IssueEnrollToken(ctx, api.EnrollTokenRequest{Name: name, Shape: shape}, s.env.Admin.ID)
	if err != nil {
		t.Fatal(err)
	}
	h, err := sim.NewHost(dir, profile, name)
	if err != nil {
		t.Fatal(err)
	}
	log := s.log.With("host", name)
	ts, err := term.New(term.Config{StateDir: dir, Accounts: term.SandboxAccounts{Home: h.Users.Home}, Hypervisor: h.Hypervisor, Log: log})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = ts.Serve(ln) }()
	a, err := agent.New(agent.Config{Server: s.env.NATSURL, StateDir: dir, Token: tok.Token, Env: h.Env("", log),
		Handlers: tasks.Default(), Hostname: name, TerminalAddr: ln.Addr().String(), Terminal: ts, Log: log,
		TerminalHostKey: strings.TrimSpace(string(gossh.MarshalAuthorizedKey(ts.HostKey())))})
	if err != nil {
		t.Fatal(err)
	}
	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- a.Run(runCtx) }()
	t.Cleanup(func() {
		cancel()
		<-done
		_ = ts.Close()
		_ = ln.Close()
		_ = h.Close()
	})
}

// login gives a user a key and a certificate from controld's user CA, as
// `gpuaas login` does.
func (s *realStack) login(c *api.Client, id string) *user { return login(s.t, c, id) }

func (s *realStack) dial(u *user, sshUser string) *gossh.Client {
	s.t.Helper()
	return s.dialVia(s.addr, u, sshUser)
}

// dialVia is dial through the gateway at addr.
func (s *realStack) dialVia(addr string, u *user, sshUser string) *gossh.Client {
	s.t.Helper()
	c, err := gossh.Dial("tcp", addr, &gossh.ClientConfig{User: sshUser, Auth: []gossh.AuthMethod{gossh.PublicKeys(u.auth)},
		HostKeyCallback: sshcert.HostKeyCallback(s.hostCA, time.Now), Timeout: 10 * time.Second})
	if err != nil {
		s.t.Fatalf("dial gateway as %s@: %v", sshUser, err)
	}
	s.t.Cleanup(func() { _ = c.Close() })
	return c
}

func (s *realStack) createAlloc(c *api.Client, sku string, gpus int) *api.Allocation {
	s.t.Helper()
	a, err := c.AllocCreate(context.Background(), api.AllocCreateRequest{Project: controldtest.ProjectName, SKU: sku, GPUs: gpus})
	if err != nil {
		s.t.Fatalf("alloc create %s: %v", sku, err)
	}
	var got *api.Allocation
	testutil.EventuallyWithin(s.t, 60*time.Second, "allocation "+a.ID+" active", func() bool {
		got, err = c.AllocGet(context.Background(), a.ID)
		if err == nil && got.State == api.AllocFailed {
			s.t.Fatalf("allocation %s: %+v; want active", a.ID, got)
		}
		return err == nil && got.State == api.AllocActive
	})
	return got
}

// TestEndToEnd: ssh <alloc>@gateway against controld, hostd agents with
// sim hosts and hostd's terminal server — bare metal and a slice (through
// the VM hop), each through a gateway reaching the node over a link and
// one reaching it over SSH: exec with exit status, a recorded PTY session
// listed by controld and byte-identical in the object store, sftp; a port
// forward; refused for a user who may not, and once the allocation is
// released.
func TestEndToEnd(t *testing.T) {
	if testing.Short() {
		t.Skip("starts Postgres, controld and two sim hosts")
	}
	s := startRealStack(t, nil)
	ctx := context.Background()
	owner := s.login(s.admin, s.env.Admin.ID)
	metal := s.createAlloc(s.admin, "h100-baremetal", 8)
	slice := s.createAlloc(s.admin, "h200-slice", 2)

	viaSSH := s.startGateway("gw-ssh", TransportSSH).Addr().String()
	for _, tr := range []struct{ name, addr string }{{TransportLink, s.addr}, {TransportSSH, viaSSH}} {
		for _, a := range []*api.Allocation{metal, slice} {
			t.Run(a.Shape+"/"+tr.name, func(t *testing.T) { testEndToEndSession(t, s, s.dialVia(tr.addr, owner, a.ID), owner, a, tr.name) })
		}
	}

	t.Run("forward", func(t *testing.T) {
		echo := sshtest.ListenEcho(t) // bare metal: the node's loopback is this machine's
		conn, err := s.dial(owner, metal.ID).Dial("tcp", echo)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		if _, err := conn.Write([]byte("ping")); err != nil {
			t.Fatal(err)
		}
		buf := make([]byte, 4)
		if _, err := io.ReadFull(conn, buf); err != nil || string(buf) != "ping" {
			t.Fatalf("got %q, %v; want ping echoed", buf, err)
		}
	})

	t.Run("openssh", func(t *testing.T) {
		o := newOpenSSHFor(t, s.addr, owner, s.hostCA)
		out, errOut, code := o.run(nil, "ssh", metal.ID+"@127.0.0.1", "echo hi; exit 3")
		if out != "hi\n" || code != 3 {
			t.Fatalf("got %q, %q, exit %d; want hi and 3", out, errOut, code)
		}
	})

	t.Run("refused", func(t *testing.T) {
		other, otherToken := s.env.AddUser(t, "mallory@example.test", api.RoleUser)
		mallory := s.login(s.env.Client(otherToken), other.ID)
		_, stderr, status, err := sshtest.Run(t, s.dial(mallory, metal.ID), "echo in")
		if err != nil || status != exitGatewayError || !strings.Contains(stderr, "gpuaas gateway:") {
			t.Fatalf("another user's allocation: got %q, %d, %v; want refused", stderr, status, err)
		}
		if _, err := s.admin.AllocRelease(ctx, api.AllocReleaseRequest{ID: slice.ID}); err != nil {
			t.Fatal(err)
		}
		testutil.Eventually(t, "the slice released", func() bool {
			a, err := s.admin.AllocGet(ctx, slice.ID)
			return err == nil && a.State == api.AllocReleased
		})
		_, stderr, status, err = sshtest.Run(t, s.dial(owner, slice.ID), "echo in")
		if err != nil || status != exitGatewayError || !strings.Contains(stderr, "not active") {
			t.Fatalf("released allocation: got %q, %d, %v; want refused as not active", stderr, status, err)
		}
	})
}

// testEndToEndSession runs exec, a recorded PTY session and sftp on c, a
// connection to allocation a through a gateway reaching its node over
// transport.
func testEndToEndSession(t *testing.T, s *realStack, c *gossh.Client, owner *user, a *api.Allocation, transport string) {
	ctx := context.Background()
	out, stderr, status, err := sshtest.Run(t, c, "echo hi; exit 3")
	if err != nil || out != "hi\n" || status != 3 {
		t.Fatalf("exec: got %q, %q, %d, %v; want \"hi\\n\" and 3", out, stderr, status, err)
	}

	// A recorded PTY session, listed and played back byte for byte.
	sess, err := c.NewSession()
	if err != nil {
		t.Fatal(err)
	}
	if err := sess.RequestPty("xterm", 30, 100, nil); err != nil {
		t.Fatal(err)
	}
	var seen sshtest.Buffer
	sess.Stdout = &seen
	cmd := "echo recorded-" + a.Shape + "-" + transport + "; exit 2"
	err = sess.Run(cmd)
	var exitErr *gossh.ExitError
	if !errors.As(err, &exitErr) || exitErr.ExitStatus() != 2 || !strings.Contains(seen.String(), "recorded-"+a.Shape+"-"+transport) {
		t.Fatalf("pty exec: got %v, output %q; want exit 2 and the output", err, seen.String())
	}
	var ts api.TerminalSession
	testutil.Eventually(t, "the session listed with its recording", func() bool {
		list, err := s.admin.SessionList(ctx, api.SessionListRequest{AllocationID: a.ID})
		if err != nil {
			return false
		}
		for _, x := range list.Sessions {
			if x.Command == cmd && x.EndedAt != nil && x.Recording != "" {
				ts = x
				return true
			}
		}
		return false
	})
	if ts.ExitStatus == nil || *ts.ExitStatus != 2 || ts.UserID != owner.id || ts.Kind != api.SessionExec {
		t.Fatalf("got session %+v; want exec by %s with exit status 2", ts, owner.id)
	}
	cast := fetchRecording(t, &env{ctl: s.env}, ts.Recording)
	if cast.output != seen.String() || cast.header.Width != 100 || cast.header.Height != 30 {
		t.Fatalf("recording: got %q (%dx%d); want %q (100x30)", cast.output, cast.header.Width, cast.header.Height, seen.String())
	}

	// sftp, byte for byte.
	sc, err := sftp.NewClient(c)
	if err != nil {
		t.Fatal(err)
	}
	defer sc.Close()
	payload := bytes.Repeat([]byte(a.ID), 100000)
	f, err := sc.Create("upload.bin")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.ReadFrom(bytes.NewReader(payload)); err != nil {
		t.Fatal(err)
	}
	f.Close()
	f, err = sc.Open("upload.bin")
	if err != nil {
		t.Fatal(err)
	}
	back, err := io.ReadAll(f)
	f.Close()
	if err != nil || !bytes.Equal(back, payload) {
		t.Fatalf("sftp: got %d bytes back (%v); want the %d sent", len(back), err, len(payload))
	}
}
