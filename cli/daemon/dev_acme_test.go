package daemon

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/gpuaas/gpuaas/cli/cmdutil"
	"github.com/gpuaas/gpuaas/cli/cmdutil/cmdtest"
)

// TestDevACMEAndWebhookCAFlags: gpuaas dev passes --https-acme-ca,
// --https-acme-ca-root and --webhook-ca-file to the platform
// (docs/expose.md, docs/webhooks.md) and refuses an ACME CA that is not
// an https URL, or a root without a CA, as usage errors.
func TestDevACMEAndWebhookCAFlags(t *testing.T) {
	tests := []struct {
		name    string
		args    []string
		wantErr string
	}{
		{name: "acme and its root", args: []string{"--https-acme-ca", "https://127.0.0.1:14000/dir", "--https-acme-ca-root", "/tmp/pebble.pem"}},
		{name: "webhook ca file", args: []string{"--webhook-ca-file", "/tmp/receiver-ca.pem"}},
		{name: "acme over http", args: []string{"--https-acme-ca", "http://127.0.0.1:14000/dir"}, wantErr: "https URL"},
		{name: "root alone", args: []string{"--https-acme-ca-root", "/tmp/pebble.pem"}, wantErr: "needs --https-acme-ca"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ios, _, _, _ := cmdutil.Test()
			var got *DevOptions
			cmd := NewCmdDev(cmdtest.Factory(ios), nil, func(_ context.Context, o *DevOptions) error { got = o; return nil })
			cmd.SetArgs(append([]string{"--data", t.TempDir()}, tt.args...))
			cmd.SetOut(ios.Out)
			cmd.SetErr(ios.ErrOut)
			err := cmd.Execute()
			if tt.wantErr != "" {
				var fe *cmdutil.FlagError
				if !errors.As(err, &fe) || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("got %v; want a usage error saying %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			set := map[string]string{"--https-acme-ca": got.HTTPSACMECA, "--https-acme-ca-root": got.HTTPSACMECARoot,
				"--webhook-ca-file": got.WebhookCAFile}
			for i := 0; i < len(tt.args); i += 2 {
				if set[tt.args[i]] != tt.args[i+1] {
					t.Errorf("%s: got %q; want %q", tt.args[i], set[tt.args[i]], tt.args[i+1])
				}
			}
		})
	}
}
