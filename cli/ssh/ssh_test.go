package ssh

import (
	"bytes"
	"context"
	"errors"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gpuaas/gpuaas/cli/cmdutil"
	"github.com/gpuaas/gpuaas/cli/cmdutil/cmdtest"
	"github.com/gpuaas/gpuaas/cli/sshconfig"
	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/clientconfig"
	"github.com/gpuaas/gpuaas/internal/sshkeys/sshkeystest"
	"github.com/gpuaas/gpuaas/internal/testutil"
)

func TestNewCmdSSH(t *testing.T) {
	tests := []struct {
		name        string
		args        []string
		wantAlloc   string
		wantCommand []string
		wantErr     bool
	}{
		{name: "shell", args: []string{"a-7k2m9x4q1c"}, wantAlloc: "a-7k2m9x4q1c"},
		{name: "command", args: []string{"a-1", "nvidia-smi"}, wantAlloc: "a-1", wantCommand: []string{"nvidia-smi"}},
		{name: "command with flags needs no --", args: []string{"a-1", "ls", "-la"}, wantAlloc: "a-1", wantCommand: []string{"ls", "-la"}},
		{name: "command after --", args: []string{"a-1", "--", "ls", "-la"}, wantAlloc: "a-1", wantCommand: []string{"ls", "-la"}},
		{name: "-- first", args: []string{"--", "a-1", "uptime"}, wantAlloc: "a-1", wantCommand: []string{"uptime"}},
		{name: "global flag before the id", args: []string{"--help=false", "a-1"}, wantAlloc: "a-1"},
		{name: "no id", args: nil, wantErr: true},
		{name: "id that reads as an ssh option", args: []string{"--", "-oProxyCommand=sh"}, wantErr: true},
		{name: "id with a host", args: []string{"a-1@evil"}, wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ios, _, _, _ := cmdutil.Test()
			var got *Options
			err := cmdtest.Execute(NewCmdSSH(&cmdutil.Factory{IOStreams: ios}, func(_ context.Context, o *Options) error { got = o; return nil }), tt.args...)
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
			if got.AllocID != tt.wantAlloc || !slices.Equal(got.Command, tt.wantCommand) {
				t.Errorf("got %q %q; want %q %q", got.AllocID, got.Command, tt.wantAlloc, tt.wantCommand)
			}
		})
	}
}

func TestArgv(t *testing.T) {
	tests := []struct {
		name    string
		command []string
		want    []string
	}{
		{"shell", nil, []string{"/usr/bin/ssh", "-F", "/c/config", "a-1@gpuaas-dev"}},
		{"command", []string{"-v", "x y"}, []string{"/usr/bin/ssh", "-F", "/c/config", "a-1@gpuaas-dev", "--", "-v", "x y"}},
	}
	for _, tt := range tests {
		if got := Argv("/usr/bin/ssh", "/c/config", "gpuaas-dev", "a-1", tt.command); !slices.Equal(got, tt.want) {
			t.Errorf("%s: got %q; want %q", tt.name, got, tt.want)
		}
	}
}

// testOptions are Options for a logged-in "dev" context against the
// controld stand-in, with ssh found at /usr/bin/ssh and exec recorded.
func testOptions(t *testing.T) (*Options, *[][]string, string) {
	t.Helper()
	cmdtest.ClearEnv(t)
	now := time.Date(2030, 1, 10, 12, 0, 0, 0, time.UTC)
	clock := testutil.NewClock(now)
	ctrl := sshkeystest.Start(t, clock.Now)
	dir := t.TempDir()
	cfg, err := clientconfig.Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	cfg.SetContext("dev", clientconfig.Context{Server: ctrl.URL, UserID: sshkeystest.UserID, Token: sshkeystest.Token, TokenExpiresAt: now.Add(time.Hour)})
	ios, _, _, _ := cmdutil.Test()
	var calls [][]string
	opts := &Options{
		Env: sshconfig.Env{
			IO:     ios,
			Config: func() (*clientconfig.Config, error) { return cfg, nil },
			Active: func() (clientconfig.Active, error) { return cfg.Active(clientconfig.Overrides{}), nil },
			Client: func() (*api.Client, error) { return ctrl.Client(sshkeystest.Token), nil },
			Now:    clock.Now,
		},
		LookPath: func(string) (string, error) { return "/usr/bin/ssh", nil },
		Exec: func(_ context.Context, _ *cmdutil.IOStreams, argv []string) (int, error) {
			calls = append(calls, argv)
			return 0, nil
		},
		AllocID: "a-7k2m9x4q1c",
	}
	return opts, &calls, dir
}

func TestRunExecsSSHWithGeneratedConfig(t *testing.T) {
	opts, calls, dir := testOptions(t)
	opts.Command = []string{"echo", "hi; exit 3"}
	if err := run(context.Background(), opts); err != nil {
		t.Fatal(err)
	}
	config := filepath.Join(dir, "ssh", "dev", "config")
	want := []string{"/usr/bin/ssh", "-F", config, "a-7k2m9x4q1c@gpuaas-dev", "--", "echo", "hi; exit 3"}
	if len(*calls) != 1 || !slices.Equal((*calls)[0], want) {
		t.Fatalf("got %q; want one exec of %q", *calls, want)
	}
	for _, f := range []string{"config", "known_hosts", "id_ed25519", "id_ed25519-cert.pub"} {
		if _, err := exec.Command("test", "-s", filepath.Join(dir, "ssh", "dev", f)).Output(); err != nil {
			t.Errorf("%s was not written before ssh ran", f)
		}
	}
}

func TestRunPropagatesExitStatus(t *testing.T) {
	opts, _, _ := testOptions(t)
	opts.Exec = func(context.Context, *cmdutil.IOStreams, []string) (int, error) { return 3, nil }
	err := run(context.Background(), opts)
	if got := cmdutil.ExitCodeOf(err); got != 3 || !errors.Is(err, cmdutil.ErrReported) {
		t.Fatalf("got %v (exit %d); want exit 3, already reported", err, got)
	}
}

func TestRunWithoutSSHInstalled(t *testing.T) {
	opts, calls, _ := testOptions(t)
	opts.LookPath = func(string) (string, error) { return "", exec.ErrNotFound }
	err := run(context.Background(), opts)
	if err == nil || !strings.Contains(err.Error(), "openssh-client") || len(*calls) != 0 {
		t.Fatalf("got %v; want an error naming openssh-client and no exec", err)
	}
}

func TestRunWithExpiredSession(t *testing.T) {
	opts, calls, _ := testOptions(t)
	opts.Now = func() time.Time { return time.Date(2030, 1, 10, 14, 0, 0, 0, time.UTC) } // session ended at 13:00
	err := run(context.Background(), opts)
	if !errors.Is(err, api.ErrUnauthenticated) || len(*calls) != 0 {
		t.Fatalf("got %v; want unauthenticated before ssh runs", err)
	}
}

func TestExecForeground(t *testing.T) {
	sh, err := exec.LookPath("sh")
	if err != nil {
		t.Skip("no sh")
	}
	tests := []struct {
		name       string
		script     string
		stdin      string
		wantStatus int
		wantOut    string
	}{
		{name: "success passes stdin through", script: "cat", stdin: "hello\n", wantOut: "hello\n"},
		{name: "exit status", script: "echo out; exit 3", wantStatus: 3, wantOut: "out\n"},
		{name: "killed by a signal", script: "kill -TERM $$", wantStatus: 128 + 15},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ios, in, out, _ := cmdutil.Test()
			in.WriteString(tt.stdin)
			status, err := execForeground(context.Background(), ios, []string{sh, "-c", tt.script})
			if err != nil || status != tt.wantStatus || out.String() != tt.wantOut {
				t.Errorf("got %d %q, %v; want %d %q", status, out, err, tt.wantStatus, tt.wantOut)
			}
		})
	}
}

func TestExecForegroundStopsOnCancel(t *testing.T) {
	sh, err := exec.LookPath("sh")
	if err != nil {
		t.Skip("no sh")
	}
	ios, _, _, _ := cmdutil.Test()
	ios.In = bytes.NewReader(nil)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	status, err := execForeground(ctx, ios, []string{sh, "-c", "exec sleep 30"})
	if err != nil || status != 128+15 {
		t.Fatalf("got %d, %v; want ssh stopped by SIGTERM (143)", status, err)
	}
}
