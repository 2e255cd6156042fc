package daemon

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/gpuaas/gpuaas/cli/cmdutil"
	"github.com/gpuaas/gpuaas/cli/cmdutil/cmdtest"
	"github.com/gpuaas/gpuaas/controld/store"
)

// TestControldInitDBFlags: `gpuaas controld init-db` needs the
// superuser's URL and defaults the role and database to gpuaas.
func TestControldInitDBFlags(t *testing.T) {
	tests := []struct {
		name    string
		args    []string
		wantErr string
		want    InitDBOptions
	}{
		{name: "no url", args: nil, wantErr: "--database-url is required"},
		{name: "defaults", args: []string{"--database-url", "postgres:///postgres"},
			want: InitDBOptions{DatabaseURL: "postgres:///postgres", Role: "gpuaas", Database: "gpuaas"}},
		{name: "all", args: []string{"--database-url", "u", "--role", "ctl", "--database", "db", "--password-file", "/pw"},
			want: InitDBOptions{DatabaseURL: "u", Role: "ctl", Database: "db", PasswordFile: "/pw"}},
		{name: "empty role", args: []string{"--database-url", "u", "--role", ""}, wantErr: "may not be empty"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ios, _, _, _ := cmdutil.Test()
			var got *InitDBOptions
			cmd := NewCmdControldInitDB(cmdtest.Factory(ios), func(_ context.Context, o *InitDBOptions) error { got = o; return nil })
			cmd.SetArgs(tt.args)
			cmd.SetOut(ios.Out)
			cmd.SetErr(ios.ErrOut)
			err := cmd.Execute()
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("got %v; want an error with %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			got.IO = nil
			if *got != tt.want {
				t.Fatalf("got %+v; want %+v", *got, tt.want)
			}
		})
	}
}

// TestControldHasInitDB: init-db is reached as `gpuaas controld init-db`.
func TestControldHasInitDB(t *testing.T) {
	ios, _, _, _ := cmdutil.Test()
	cmd := NewCmdControld(cmdtest.Factory(ios), nil)
	sub, _, err := cmd.Find([]string{"init-db"})
	if err != nil || sub.Name() != "init-db" {
		t.Fatalf("controld init-db: got %v, %v; want the init-db command", sub, err)
	}
}

// TestRoleSetupHint: a migration refused for want of init-db says to run
// it; other errors are left alone.
func TestRoleSetupHint(t *testing.T) {
	err := roleSetupHint(fmt.Errorf("migrate: %w: permission denied to create role", store.ErrRoleSetup))
	if !strings.Contains(err.Error(), "gpuaas controld init-db") {
		t.Fatalf("got %q; want the init-db hint", err)
	}
	other := fmt.Errorf("connect: refused")
	if got := roleSetupHint(other); got != other {
		t.Fatalf("got %v; want the error unchanged", got)
	}
}
