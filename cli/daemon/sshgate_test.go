package daemon

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/gpuaas/gpuaas/cli/cmdutil"
)

func TestNewCmdSSHGate(t *testing.T) {
	tokenFile := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(tokenFile, []byte("gpt_from_file\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	empty := filepath.Join(t.TempDir(), "empty")
	if err := os.WriteFile(empty, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name      string
		args      []string
		env       string // GPUAAS_SERVICE_TOKEN
		wantErr   bool
		wantToken string
		wantOpts  func(*SSHGateOptions) bool
	}{
		{name: "token file", args: []string{"--token-file", tokenFile}, env: "gpt_env", wantToken: "gpt_from_file"},
		{name: "token from the environment", env: " gpt_env\n", wantToken: "gpt_env"},
		{name: "no token", wantErr: true},
		{name: "empty token file", args: []string{"--token-file", empty}, wantErr: true},
		{name: "flags", env: "gpt_env", wantToken: "gpt_env",
			args: []string{"--listen", "127.0.0.1:2200", "--server", "nats://n:4222", "--host-key", "/k", "--advertise", "ssh.example.test:22",
				"--principal", "a", "--principal", "b"},
			wantOpts: func(o *SSHGateOptions) bool {
				return o.Listen == "127.0.0.1:2200" && o.Server == "nats://n:4222" && o.HostKey == "/k" &&
					o.Advertise == "ssh.example.test:22" && slices.Equal(o.Principals, []string{"a", "b"})
			}},
		{name: "defaults", env: "gpt_env", wantToken: "gpt_env", wantOpts: func(o *SSHGateOptions) bool {
			return o.Listen == ":2222" && o.Server == "nats://127.0.0.1:4222" && o.HostKey != ""
		}},
		{name: "arguments refused", args: []string{"extra"}, env: "gpt_env", wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Setenv("GPUAAS_SERVICE_TOKEN", tt.env)
			t.Setenv("GPUAAS_NATS_URL", "")
			ios, _, _, _ := cmdutil.Test()
			var got *SSHGateOptions
			cmd := NewCmdSSHGate(cmdutil.New(ios), func(_ context.Context, o *SSHGateOptions) error {
				got = o
				return nil
			})
			cmd.SetArgs(tt.args)
			cmd.SetOut(ios.Out)
			cmd.SetErr(ios.ErrOut)
			err := cmd.Execute()
			if tt.wantErr {
				var flagErr *cmdutil.FlagError
				if !errors.As(err, &flagErr) {
					t.Fatalf("got %v; want a usage error", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got.Token != tt.wantToken {
				t.Fatalf("got token %q; want %q", got.Token, tt.wantToken)
			}
			if tt.wantOpts != nil && !tt.wantOpts(got) {
				t.Fatalf("got options %+v", got)
			}
		})
	}
}

// TestSSHCommandTree: the tree served over SSH holds the API commands and
// nothing that acts on the gateway's machine.
func TestSSHCommandTree(t *testing.T) {
	ios, _, _, _ := cmdutil.Test()
	root := SSHCommandTree(cmdutil.New(ios))
	var names []string
	for _, c := range root.Commands() {
		names = append(names, c.Name())
	}
	for _, want := range []string{"whoami", "project", "catalog", "alloc", "session"} {
		if !slices.Contains(names, want) {
			t.Errorf("got commands %q; want %s", names, want)
		}
	}
	for _, never := range []string{"login", "logout", "ssh", "ssh-config", "dev", "controld", "hostd", "sshgate", "completion"} {
		if slices.Contains(names, never) {
			t.Errorf("got commands %q; want no %s over SSH", names, never)
		}
	}
	// Fresh per call: flag state does not leak between sessions.
	if SSHCommandTree(cmdutil.New(ios)) == root {
		t.Fatal("got the same tree twice; want a fresh one")
	}
}
