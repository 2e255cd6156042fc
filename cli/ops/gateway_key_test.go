package ops

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"

	"github.com/gpuaas/gpuaas/controld/controldtest"
	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/sshcert"
)

func TestNewCmdGatewayKeyAdd(t *testing.T) {
	tests := []struct {
		name string
		args []string
		want GatewayKeyAddOptions
	}{
		{"key argument", []string{"gw-1", "ssh-ed25519 AAAA"}, GatewayKeyAddOptions{Name: "gw-1", Key: "ssh-ed25519 AAAA"}},
		{"key file", []string{"gw-1", "--key-file", "k.pub"}, GatewayKeyAddOptions{Name: "gw-1", KeyFile: "k.pub"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ios, _ := testStreams(false)
			var got *GatewayKeyAddOptions
			if err := execute(NewCmdGatewayKeyAdd(testFactory(ios), func(_ context.Context, o *GatewayKeyAddOptions) error { got = o; return nil }), tt.args...); err != nil {
				t.Fatal(err)
			}
			if got.Name != tt.want.Name || got.Key != tt.want.Key || got.KeyFile != tt.want.KeyFile {
				t.Errorf("got %+v; want %+v", *got, tt.want)
			}
		})
	}
	for _, args := range [][]string{{}, {"gw-1"}, {"gw-1", "k", "--key-file", "f"}, {"gw-1", "k", "extra"}} {
		ios, _ := testStreams(false)
		wantUsageError(t, execute(NewCmdGatewayKeyAdd(testFactory(ios), func(context.Context, *GatewayKeyAddOptions) error { return nil }), args...))
	}
}

func TestNewCmdGatewayKeyRevoke(t *testing.T) {
	ios, _ := testStreams(false)
	var got *GatewayKeyRevokeOptions
	if err := execute(NewCmdGatewayKeyRevoke(testFactory(ios), func(_ context.Context, o *GatewayKeyRevokeOptions) error { got = o; return nil }),
		"gw-1", "--yes"); err != nil {
		t.Fatal(err)
	}
	if got.Key != "gw-1" || !got.Yes {
		t.Errorf("got %+v; want gw-1, yes", *got)
	}
	wantUsageError(t, execute(NewCmdGatewayKeyRevoke(testFactory(ios), func(context.Context, *GatewayKeyRevokeOptions) error { return nil })))
}

// TestGatewayKeyCommands registers a key from its .pub file, lists it and
// revokes it against a real controld, as an admin would.
func TestGatewayKeyCommands(t *testing.T) {
	env := controldtest.Start(t, controldtest.Options{NoNodes: true})
	client := func() (*api.Client, error) { return env.Client(env.AdminToken), nil }
	k, err := sshcert.GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	pub, err := ssh.NewPublicKey(k.Public())
	if err != nil {
		t.Fatal(err)
	}
	keyFile := filepath.Join(t.TempDir(), "gateway_ed25519_key.pub")
	if err := os.WriteFile(keyFile, ssh.MarshalAuthorizedKey(pub), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	nowFn := func() time.Time { return now }

	ios, out := testStreams(false)
	if err := gatewayKeyAddRun(ctx, &GatewayKeyAddOptions{IO: ios, Client: client, Now: nowFn, Name: "gw-1", KeyFile: keyFile}); err != nil {
		t.Fatal(err)
	}
	fp := ssh.FingerprintSHA256(pub)
	if !strings.HasPrefix(out.String(), "gw-1\t"+fp+"\tin use\t") {
		t.Errorf("add printed %q; want gw-1, %s, in use", out.String(), fp)
	}

	ios, out = testStreams(false)
	var exp GatewayKeyListOptions
	if err := execute(NewCmdGatewayKeyList(testFactory(ios), func(_ context.Context, o *GatewayKeyListOptions) error { exp = *o; return nil }), "--json", "name,id"); err != nil {
		t.Fatal(err)
	}
	exp.Client, exp.Now = client, nowFn
	if err := gatewayKeyListRun(ctx, &exp); err != nil {
		t.Fatal(err)
	}
	var listed []map[string]string
	if err := json.Unmarshal(out.Bytes(), &listed); err != nil || len(listed) != 1 || listed[0]["id"] != fp || listed[0]["name"] != "gw-1" {
		t.Fatalf("list --json printed %q (%v); want the key", out.String(), err)
	}

	ios, out = testStreams(false)
	if err := gatewayKeyRevokeRun(ctx, &GatewayKeyRevokeOptions{IO: ios, Client: client, Now: nowFn, Key: "gw-1", Yes: true}); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "\trevoked\t") {
		t.Errorf("revoke printed %q; want it revoked", out.String())
	}
}
