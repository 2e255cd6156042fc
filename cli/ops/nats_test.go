package ops

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nkeys"

	"github.com/gpuaas/gpuaas/cli/cmdutil/cmdtest"
	"github.com/gpuaas/gpuaas/controld/controldtest"
	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/bus"
	"github.com/gpuaas/gpuaas/internal/gateproto"
	"github.com/gpuaas/gpuaas/internal/testutil"
)

func TestMain(m *testing.M) { os.Exit(testutil.Main(m)) }

// TestNATSSetup: nats-setup writes keys only controld's user can read and
// a configuration a real nats-server loads with the callout pointing at
// them; it never overwrites keys unless told to.
func TestNATSSetup(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "nats")
	ios, out := testStreams(false)
	if err := cmdtest.Execute(NewCmdNATSSetup(cmdtest.Factory(ios), nil), "--out", dir); err != nil {
		t.Fatal(err)
	}
	keys, err := bus.LoadKeys(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{bus.IssuerKeyFile, bus.XKeyFile, bus.ControldKeyFile, bus.SystemKeyFile} {
		fi, err := os.Stat(filepath.Join(dir, name))
		if err != nil || fi.Mode().Perm() != 0o600 {
			t.Errorf("%s: %v, mode %v; want 0600", name, err, fi.Mode().Perm())
		}
	}
	if fi, err := os.Stat(dir); err != nil || fi.Mode().Perm() != 0o700 {
		t.Errorf("%s: mode %v; want 0700", dir, fi.Mode().Perm())
	}
	conf := filepath.Join(dir, NATSConfigFile)
	data, err := os.ReadFile(conf)
	if err != nil {
		t.Fatal(err)
	}
	for _, secret := range []func() ([]byte, error){keys.Issuer.Seed, keys.XKey.Seed, keys.Controld.Seed, keys.System.Seed} {
		s, _ := secret()
		if strings.Contains(string(data), string(s)) {
			t.Fatalf("the server configuration holds a seed")
		}
	}
	opts, err := server.ProcessConfigFile(conf)
	if err != nil {
		t.Fatalf("nats-server cannot load %s: %v", conf, err)
	}
	issuer, _ := keys.Issuer.PublicKey()
	if opts.AuthCallout == nil || opts.AuthCallout.Issuer != issuer || opts.AuthCallout.Account != bus.AppAccount {
		t.Fatalf("got auth callout %+v; want issuer %s in account %s", opts.AuthCallout, issuer, bus.AppAccount)
	}

	cmdtest.WantUsageError(t, cmdtest.Execute(NewCmdNATSSetup(cmdtest.Factory(ios), nil), "--out", dir), "")
	if again, _ := bus.LoadKeys(dir); again.Public() != keys.Public() {
		t.Fatal("a second nats-setup without --force replaced the keys")
	}
	out.Reset()
	if err := cmdtest.Execute(NewCmdNATSSetup(cmdtest.Factory(ios), nil), "--out", dir, "--print"); err != nil {
		t.Fatal(err)
	}
	if out.String() != string(data) {
		t.Errorf("--print got %q; want the written configuration", out.String())
	}
	if err := cmdtest.Execute(NewCmdNATSSetup(cmdtest.Factory(ios), nil), "--out", dir, "--force"); err != nil {
		t.Fatal(err)
	}
	if again, _ := bus.LoadKeys(dir); again.Public() == keys.Public() {
		t.Fatal("--force kept the old keys")
	}
}

// TestNATSIdentityLifecycle: add makes a key here and registers only its
// public half; the key then connects as a gateway; revoke closes that
// connection and refuses the next one.
func TestNATSIdentityLifecycle(t *testing.T) {
	env := controldtest.Start(t, controldtest.Options{NoNodes: true})
	ios, _ := testStreams(false)
	f := cmdtest.Factory(ios)
	f.Client = func() (*api.Client, error) { return env.Client(env.AdminToken), nil }
	seedFile := filepath.Join(t.TempDir(), "gw.nk")
	if err := cmdtest.Execute(NewCmdNATSIdentityAdd(f, nil), "--kind", "gateway", "--name", "gw-1", "--out", seedFile); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(seedFile)
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("seed file: %v, mode %v; want 0600", err, fi.Mode().Perm())
	}
	key, err := bus.ReadSeedFile(seedFile, nkeys.PrefixByteUser)
	if err != nil {
		t.Fatal(err)
	}
	pub, _ := key.PublicKey()
	ids, err := env.Client(env.AdminToken).BusIdentityList(t.Context())
	if err != nil || len(ids) != 1 || ids[0].PublicKey != pub || ids[0].Kind != api.BusIdentityGateway {
		t.Fatalf("got keys %+v, %v; want the gateway key %s", ids, err, pub)
	}
	// The file exists: no second key is made over it.
	cmdtest.WantUsageError(t, cmdtest.Execute(NewCmdNATSIdentityAdd(f, nil), "--kind", "gateway", "--name", "gw-1", "--out", seedFile), "")
	cmdtest.WantUsageError(t, cmdtest.Execute(NewCmdNATSIdentityAdd(f, nil), "--kind", "admin", "--name", "x", "--out", seedFile+"2"), "")

	nc := testutil.Connect(t, env.NATSURL, bus.WithKey(key), nats.CustomInboxPrefix(api.InboxPrefix(pub)), nats.MaxReconnects(0))
	login, err := gateproto.NewGatewayLogin(nc, key, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := login.Token(t.Context()); err != nil {
		t.Fatalf("gateway login with the new key: %v", err)
	}
	if err := cmdtest.Execute(NewCmdNATSIdentityRevoke(f, nil), "gw-1"); err != nil {
		t.Fatal(err)
	}
	testutil.EventuallyWithin(t, 5*time.Second, "the revoked key's connection to be closed", nc.IsClosed)
	if c, err := nats.Connect(env.NATSURL, bus.WithKey(key)); err == nil {
		c.Close()
		t.Fatal("the revoked key connected again")
	}
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	ids, _ = env.Client(env.AdminToken).BusIdentityList(ctx)
	if len(ids) != 1 || ids[0].RevokedAt == nil {
		t.Errorf("got keys %+v; want the key revoked", ids)
	}
}
