package devenv_test

import (
	"bufio"
	"context"
	"net"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gpuaas/gpuaas/controld/controldtest"
	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/bus"
	"github.com/gpuaas/gpuaas/internal/devenv"
	"github.com/gpuaas/gpuaas/internal/testutil"
)

func TestMain(m *testing.M) { os.Exit(testutil.Main(m)) }

// start runs the platform with hosts sim hosts on dir and database dsn
// until the test ends.
func start(t *testing.T, dir, dsn string, hosts int, password string) *devenv.Env {
	t.Helper()
	env, err := devenv.Start(context.Background(), devenv.Config{DataDir: dir, DatabaseURL: dsn, Hosts: hosts,
		AdminPassword: password, Log: testutil.Logger(t)})
	if err != nil {
		t.Fatalf("start: %v", err)
	}
	t.Cleanup(func() { _ = env.Close() })
	return env
}

// TestStartServesAndRestartReusesData: the platform comes up seeded, with
// ready sim hosts, the trust model on NATS (a user's session token is
// their connection's credential) and an SSH gateway; Close frees its
// ports; a second Start on the same data keeps the admin and the hosts'
// identities, and sets a password it is given.
func TestStartServesAndRestartReusesData(t *testing.T) {
	dir, dsn := t.TempDir(), testutil.Postgres(t, controldtest.Template)
	ctx := context.Background()

	env := start(t, dir, dsn, 2, "")
	if !env.AdminCreated || !env.PasswordGenerated || env.AdminPassword == "" {
		t.Fatalf("first start: created %v, generated %v, password %q; want a new admin with a generated password",
			env.AdminCreated, env.PasswordGenerated, env.AdminPassword)
	}
	if want := []string{"sim-slice-1", "sim-metal-2"}; !slices.Equal(env.Hosts, want) {
		t.Fatalf("got hosts %q; want %q", env.Hosts, want)
	}
	wantReadyNodes(t, env)
	whoami(t, env, env.AdminPassword)
	wantSSH(t, env.GatewayAddr)
	gateway, nats := env.GatewayAddr, env.NATSURL
	if err := env.Close(); err != nil {
		t.Fatalf("close: %v", err)
	}
	for _, addr := range []string{strings.Replace(gateway, "localhost", "127.0.0.1", 1), strings.TrimPrefix(nats, "nats://")} {
		l, err := net.Listen("tcp", addr)
		if err != nil {
			t.Fatalf("after Close, %s is still taken: %v", addr, err)
		}
		l.Close()
	}

	env = start(t, dir, dsn, 2, "a password of my own")
	if env.AdminCreated || env.PasswordGenerated || env.AdminPassword != "a password of my own" {
		t.Fatalf("second start: created %v, generated %v, password %q; want the admin kept and the given password",
			env.AdminCreated, env.PasswordGenerated, env.AdminPassword)
	}
	nodes, err := env.Controld.Nodes(ctx)
	if err != nil || len(nodes) != 2 {
		t.Fatalf("after restart: nodes %+v, %v; want the 2 hosts enrolled once", nodes, err)
	}
	wantReadyNodes(t, env)
	whoami(t, env, "a password of my own")
}

// TestWaitReturnsWhenTold: Wait returns nil once its context ends.
func TestWaitReturnsWhenTold(t *testing.T) {
	env := start(t, t.TempDir(), testutil.Postgres(t, controldtest.Template), 0, "")
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- env.Wait(ctx) }()
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("got %v; want nil", err)
	}
}

func wantReadyNodes(t *testing.T, env *devenv.Env) {
	t.Helper()
	nodes, err := env.Controld.Nodes(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range nodes {
		if n.State != api.NodeReady || n.SlotsTotal == 0 {
			t.Errorf("node %s: state %s, %d slots; want ready with slots", n.Name, n.State, n.SlotsTotal)
		}
	}
}

// whoami logs the admin in with password and asks who they are over a
// connection whose credential is the session token.
func whoami(t *testing.T, env *devenv.Env, password string) {
	t.Helper()
	ctx := context.Background()
	login, err := env.Controld.Identity().Login(ctx, env.Controld.Pool(), devenv.AdminEmail, password)
	if err != nil {
		t.Fatalf("login: %v", err)
	}
	opts, ok := api.SessionConnOptions(login.Token)
	if !ok {
		t.Fatalf("login gave no session token: %q", login.Token)
	}
	nc, err := bus.Connect(env.NATSURL, t.Name(), opts...)
	if err != nil {
		t.Fatalf("connect as the admin: %v", err)
	}
	defer nc.Close()
	who, err := api.NewClient(nc, api.WithToken(login.Token)).Whoami(ctx)
	if err != nil || who.User.Email != devenv.AdminEmail {
		t.Fatalf("whoami: %+v, %v; want %s", who, err, devenv.AdminEmail)
	}
}

// wantSSH checks an SSH server answers on addr.
func wantSSH(t *testing.T, addr string) {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, 10*time.Second)
	if err != nil {
		t.Fatalf("ssh gateway: %v", err)
	}
	defer c.Close()
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
	line, err := bufio.NewReader(c).ReadString('\n')
	if err != nil || !strings.HasPrefix(line, "SSH-2.0-") {
		t.Fatalf("ssh gateway said %q, %v; want an SSH banner", line, err)
	}
}
