package sshconfig

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gpuaas/gpuaas/cli/cmdutil"
	"github.com/gpuaas/gpuaas/cli/cmdutil/cmdtest"
	"github.com/gpuaas/gpuaas/internal/clientconfig"
)

func TestNewCmdSSHConfig(t *testing.T) {
	tests := []struct {
		name    string
		args    []string
		want    Options
		wantErr bool
	}{
		{name: "defaults", want: Options{}},
		{name: "all flags", args: []string{"--write", "--print-include", "--gateway", "gw:2222"},
			want: Options{Write: true, PrintInclude: true, Gateway: "gw:2222"}},
		{name: "auto", args: []string{"--gateway", "auto"}, want: Options{Gateway: "auto"}},
		{name: "bad gateway", args: []string{"--gateway", "gw:port"}, wantErr: true},
		{name: "argument", args: []string{"extra"}, wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ios, _, _, _ := cmdutil.Test()
			f := &cmdutil.Factory{IOStreams: ios}
			var got *Options
			err := cmdtest.Execute(NewCmdSSHConfig(f, func(_ context.Context, o *Options) error { got = o; return nil }), tt.args...)
			if tt.wantErr {
				var fe *cmdutil.FlagError
				if !errors.As(err, &fe) {
					t.Fatalf("got %v; want a usage error", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got.Write != tt.want.Write || got.PrintInclude != tt.want.PrintInclude || got.Gateway != tt.want.Gateway {
				t.Errorf("got %+v; want %+v", *got, tt.want)
			}
		})
	}
}

func TestSSHConfigPrintsTheIncludeLine(t *testing.T) {
	tests := []struct {
		name         string
		printInclude bool
		wantStdout   bool
	}{
		{name: "to stderr"},
		{name: "--print-include to stdout", printInclude: true, wantStdout: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t, t0)
			userConfig := filepath.Join(t.TempDir(), "ssh_config")
			opts := &Options{Env: f.env, PrintInclude: tt.printInclude,
				UserConfig: func() (string, error) { return userConfig, nil }}
			if err := run(context.Background(), opts); err != nil {
				t.Fatal(err)
			}
			if _, err := os.Stat(userConfig); !errors.Is(err, os.ErrNotExist) {
				t.Fatalf("%s touched without --write (%v)", userConfig, err)
			}
			include := "Include " + filepath.Join(f.dir, "ssh", "dev", "config")
			if tt.wantStdout {
				if got := f.out.String(); got != include+"\n" {
					t.Errorf("got stdout %q; want exactly %q", got, include+"\n")
				}
			} else {
				if f.out.Len() != 0 {
					t.Errorf("got stdout %q; want nothing", f.out)
				}
				if !strings.Contains(f.errOut.String(), "    "+include+"\n") || !strings.Contains(f.errOut.String(), "to the top of "+userConfig) {
					t.Errorf("got stderr %q; want the Include line and the file OpenSSH reads", f.errOut)
				}
			}
			if !strings.Contains(f.errOut.String(), "ssh <alloc-id>@localhost") {
				t.Errorf("got stderr %q; want how to use it", f.errOut)
			}
		})
	}
}

func TestSSHConfigWrite(t *testing.T) {
	f := newFixture(t, t0)
	userConfig := filepath.Join(t.TempDir(), ".ssh", "config")
	opts := &Options{Env: f.env, Write: true, UserConfig: func() (string, error) { return userConfig, nil }}
	for range 2 {
		if err := run(context.Background(), opts); err != nil {
			t.Fatal(err)
		}
	}
	b, err := os.ReadFile(userConfig)
	if err != nil {
		t.Fatal(err)
	}
	include := "Include " + filepath.Join(f.dir, "ssh", "dev", "config")
	if strings.Count(string(b), include) != 1 {
		t.Errorf("got ~/.ssh/config:\n%s\nwant the Include line once", b)
	}
	if !strings.Contains(f.errOut.String(), "already includes it") {
		t.Errorf("got stderr %q; want the second run to say so", f.errOut)
	}
}

func TestSSHConfigWithExpiredSession(t *testing.T) {
	f := newFixture(t, t0)
	f.cfg.UpdateContext("dev", func(c *clientconfig.Context) { c.TokenExpiresAt = t0.Add(-1) })
	err := run(context.Background(), &Options{Env: f.env})
	if cmdutil.ExitCodeOf(err) != cmdutil.ExitUnauthenticated {
		t.Fatalf("got %v (exit %d); want unauthenticated", err, cmdutil.ExitCodeOf(err))
	}
}
