package daemon

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/gpuaas/gpuaas/cli/cmdutil"
	"github.com/gpuaas/gpuaas/cli/cmdutil/cmdtest"
)

func TestDevOIDCFlags(t *testing.T) {
	tests := []struct {
		name    string
		args    []string
		wantErr string
	}{
		{name: "both", args: []string{"--oidc-issuer", "https://idp.example.test", "--oidc-client-id", "gpuaas-cli"}},
		{name: "neither"},
		{name: "issuer alone", args: []string{"--oidc-issuer", "https://idp.example.test"}, wantErr: "go together"},
		{name: "client id alone", args: []string{"--oidc-client-id", "gpuaas-cli"}, wantErr: "go together"},
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
			if len(tt.args) > 0 && (got.OIDC.Issuer != tt.args[1] || got.OIDC.ClientID != tt.args[3]) {
				t.Fatalf("got issuer %q client %q; want %v", got.OIDC.Issuer, got.OIDC.ClientID, tt.args)
			}
		})
	}
}
