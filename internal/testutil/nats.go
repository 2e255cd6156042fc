package testutil

import (
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"sync"
	"testing"

	"github.com/nats-io/nats.go"

	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/bus"
)

// Bus is a real embedded NATS server with JetStream and the gpuaas trust
// model (accounts, controld's users, the auth callout; see
// bus.ServerAuth.Config) on a random loopback port. Every connection but
// controld's is decided by controld's callout, so a test without a
// controld can only connect as controld (Connect).
type Bus struct {
	// URL is the server's client URL.
	URL string
	// Keys are the deployment's keys, as controld holds them.
	Keys *bus.Keys
	// tls, when set, is what the server serves (NATSTLS).
	tls TLSFiles
	// cfg starts the server again (Restart) on the same port and store.
	cfg bus.Config
	// mu protects srv.
	mu  sync.Mutex
	srv *bus.Server
}

// NATS starts a Bus for the test; it stops at cleanup.
func NATS(t testing.TB) *Bus {
	t.Helper()
	return startBus(t, TLSFiles{})
}

// TestMaxStore is the JetStream store test servers declare: the streams'
// byte limits (EVENTS, recordings, LOGS: gigabytes each by default) are
// reserved against it when made, while tests write megabytes. Left to
// nats-server's default (75% of the free disk) the reservations fail on a
// machine whose disk is fuller, whatever the test does.
const TestMaxStore = 1 << 40

func startBus(t testing.TB, files TLSFiles) *Bus {
	t.Helper()
	keys, err := bus.GenerateKeys()
	if err != nil {
		t.Fatalf("nats keys: %v", err)
	}
	auth := keys.Public()
	cfg := bus.Config{StoreDir: t.TempDir(), Auth: &auth, MaxStore: TestMaxStore,
		TLS: bus.ServerTLS{CertFile: files.CertFile, KeyFile: files.KeyFile}}
	srv, err := bus.Start(cfg)
	if err != nil {
		t.Fatalf("start nats: %v", err)
	}
	b := &Bus{URL: srv.ClientURL(), Keys: keys, tls: files, cfg: cfg, srv: srv}
	t.Cleanup(b.Stop)
	return b
}

// Stop shuts the server down, as a crash or an upgrade of NATS does:
// every connection drops and reconnects once Restart brings it back.
func (b *Bus) Stop() {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.srv != nil {
		b.srv.Shutdown()
		b.srv = nil
	}
}

// Restart starts a stopped server again on the same port with the same
// JetStream store, so streams and their sequences survive. It returns an
// error rather than failing the test so that a goroutine may call it.
func (b *Bus) Restart() error {
	u, err := url.Parse(b.URL)
	if err != nil {
		return err
	}
	cfg := b.cfg
	if cfg.Port, err = strconv.Atoi(u.Port()); err != nil {
		return fmt.Errorf("restart nats: port of %s: %w", b.URL, err)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.srv != nil {
		return errors.New("restart nats: the server is running")
	}
	if b.srv, err = bus.Start(cfg); err != nil {
		return fmt.Errorf("restart nats: %w", err)
	}
	return nil
}

// PlainNATS starts a server without the trust model: any client may do
// anything. Only benchmarks use it, as the baseline the callout's cost is
// measured against.
func PlainNATS(t testing.TB) *Bus {
	t.Helper()
	srv, err := bus.Start(bus.Config{StoreDir: t.TempDir(), MaxStore: TestMaxStore})
	if err != nil {
		t.Fatalf("start nats: %v", err)
	}
	t.Cleanup(srv.Shutdown)
	return &Bus{URL: srv.ClientURL()}
}

// Connect dials the bus as controld (every permission in the app
// account) and closes the connection at cleanup.
func (b *Bus) Connect(t testing.TB, opts ...nats.Option) *nats.Conn {
	t.Helper()
	return Connect(t, b.URL, append(b.tlsOpts(), append([]nats.Option{bus.WithKey(b.Keys.Controld),
		nats.CustomInboxPrefix(api.ControldInboxPrefix)}, opts...)...)...)
}

func (b *Bus) tlsOpts() []nats.Option {
	if b.tls.CAFile == "" {
		return nil
	}
	return []nats.Option{nats.RootCAs(b.tls.CAFile)}
}

// ConnectSystem dials the bus as controld's system-account user.
func (b *Bus) ConnectSystem(t testing.TB) *nats.Conn {
	t.Helper()
	return Connect(t, b.URL, append(b.tlsOpts(), bus.WithKey(b.Keys.System), nats.CustomInboxPrefix(api.ControldInboxPrefix))...)
}

// Connect dials url with opts (which carry the identity) and closes the
// connection at cleanup.
func Connect(t testing.TB, url string, opts ...nats.Option) *nats.Conn {
	t.Helper()
	nc, err := bus.Connect(url, t.Name(), opts...)
	if err != nil {
		t.Fatalf("connect nats: %v", err)
	}
	t.Cleanup(nc.Close)
	return nc
}

// NATSCLIInstall installs natscli, the NATS project's own client.
const NATSCLIInstall = "go install github.com/nats-io/natscli/nats@v0.5.1"

// NATSCLI returns the path of natscli's `nats`; without it the test fails
// and says how to install it (.ci/run does).
func NATSCLI(t testing.TB) string {
	t.Helper()
	bin, err := GoBinary("nats")
	if err != nil {
		t.Fatalf("natscli: %v; install it with `%s`", err, NATSCLIInstall)
	}
	return bin
}

// NATSServerInstall installs the stand-alone nats-server, the version
// go.mod embeds.
const NATSServerInstall = "go install github.com/nats-io/nats-server/v2@v2.15.2"

// NATSServer returns the path of the stand-alone nats-server binary;
// without it the test fails and says how to install it (scripts/deps
// test does).
func NATSServer(t testing.TB) string {
	t.Helper()
	bin, err := GoBinary("nats-server")
	if err != nil {
		t.Fatalf("nats-server: %v; install it with `%s`", err, NATSServerInstall)
	}
	return bin
}
