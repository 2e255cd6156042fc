package daemon

import (
	"context"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gpuaas/gpuaas/cli/cmdutil"
	"github.com/gpuaas/gpuaas/cli/cmdutil/cmdtest"
	"github.com/gpuaas/gpuaas/internal/testutil"
)

func TestControldWebhookFlags(t *testing.T) {
	ios, _, _, _ := cmdutil.Test()
	var got *ControldOptions
	cmd := NewCmdControld(cmdtest.Factory(ios), func(_ context.Context, o *ControldOptions) error { got = o; return nil })
	caFile := testutil.TLS(t).CAFile
	cmd.SetArgs([]string{"--database-url", "postgres://db/x", "--nats-keys", "/k", "--webhook-allow-private",
		"--webhook-deny", "203.0.113.0/24,2001:db8::/32", "--webhook-max-attempts", "3", "--webhook-ca-file", caFile})
	cmd.SetOut(ios.Out)
	cmd.SetErr(ios.ErrOut)
	if err := cmd.Execute(); err != nil {
		t.Fatal(err)
	}
	s, err := webhookSettings(got)
	if err != nil {
		t.Fatal(err)
	}
	if !s.Policy.AllowPrivate || s.MaxAttempts != 3 || s.RootCAs == nil || len(s.Policy.Deny) != 2 ||
		s.Policy.Deny[0] != netip.MustParsePrefix("203.0.113.0/24") {
		t.Fatalf("settings %+v", s)
	}
	for _, bad := range [][]string{
		{"--webhook-deny", "203.0.113.0"},
		{"--webhook-max-attempts", "0"},
	} {
		ios, _, _, _ := cmdutil.Test()
		cmd := NewCmdControld(cmdtest.Factory(ios), func(context.Context, *ControldOptions) error { return nil })
		cmd.SetArgs(append([]string{"--database-url", "postgres://db/x", "--nats-keys", "/k"}, bad...))
		cmd.SetOut(ios.Out)
		cmd.SetErr(ios.ErrOut)
		if err := cmd.Execute(); err == nil || !strings.Contains(err.Error(), bad[0]) {
			t.Errorf("%v: %v; want a usage error naming %s", bad, err, bad[0])
		}
	}
	notPEM := filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(notPEM, []byte("not a certificate"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{filepath.Join(t.TempDir(), "none.pem"), notPEM} {
		if _, err := webhookSettings(&ControldOptions{WebhookCAFile: f}); err == nil {
			t.Errorf("--webhook-ca-file %s: want an error", f)
		}
	}
}
