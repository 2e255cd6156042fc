package cli

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"testing"

	"github.com/spf13/cobra"

	"github.com/gpuaas/gpuaas/cli/cmdutil"
	"github.com/gpuaas/gpuaas/cli/cmdutil/cmdtest"
	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/clientconfig"
)

// isolate gives the test an empty config and no GPUAAS_* settings.
func isolate(t *testing.T) {
	t.Helper()
	t.Setenv(clientconfig.EnvConfigDir, t.TempDir())
	cmdtest.ClearEnv(t)
}

// runCLI runs the command tree with args over test streams, with extra
// commands added under the root.
func runCLI(t *testing.T, ctx context.Context, args []string, extra ...*cobra.Command) (code int, stdout, stderr string) {
	t.Helper()
	ios, _, out, errOut := cmdutil.Test()
	f := NewFactory(ios)
	defer f.Close()
	code = run(ctx, f, args, extra...)
	return code, out.String(), errOut.String()
}

func TestUsageErrors(t *testing.T) {
	isolate(t)
	tests := []struct {
		name     string
		args     []string
		wantErr  string
		wantHelp string
	}{
		{"unknown command", []string{"frobnicate"}, `unknown command "frobnicate" for "gpuaas"`, "gpuaas --help"},
		{"suggestion", []string{"aloc"}, "did you mean alloc?", "gpuaas --help"},
		{"unknown subcommand", []string{"alloc", "frob"}, `unknown command "frob" for "gpuaas alloc"`, "gpuaas alloc --help"},
		{"unknown flag", []string{"alloc", "list", "--nope"}, "unknown flag: --nope", "gpuaas alloc list --help"},
		{"bad flag value", []string{"alloc", "create", "--gpus", "two"}, `invalid value "two" for --gpus: it takes a whole number`, "gpuaas alloc create --help"},
		{"missing argument", []string{"alloc", "get"}, "requires an allocation ID", "gpuaas alloc get --help"},
		{"too many arguments", []string{"node", "drain", "n1", "n2"}, "too many arguments", "gpuaas node drain --help"},
		{"local validation", []string{"alloc", "create", "--sku", "h100", "--gpus", "0"}, "--gpus must be at least 1", "gpuaas alloc create --help"},
		{"unknown json field", []string{"catalog", "list", "--json=nope"}, `unknown JSON field "nope"`, "gpuaas catalog list --help"},
		{"login needs a terminal or --password-stdin", []string{"login", "--email", "a@b"}, "--password-stdin", "gpuaas login --help"},
		{"ssh needs an allocation", []string{"ssh"}, "requires an allocation ID", "gpuaas ssh --help"},
		{"ssh refuses an option as the allocation", []string{"ssh", "--", "-oProxyCommand=x"}, `invalid allocation ID "-oProxyCommand=x"`, "gpuaas ssh --help"},
		{"ssh-config checks --gateway", []string{"ssh-config", "--gateway", "gw:none"}, "--gateway", "gpuaas ssh-config --help"},
		{"session play needs an ID", []string{"session", "play"}, "requires a session ID", "gpuaas session play --help"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, stdout, stderr := runCLI(t, context.Background(), tt.args)
			if code != cmdutil.ExitUsage {
				t.Errorf("got exit %d; want %d (stderr %q)", code, cmdutil.ExitUsage, stderr)
			}
			if !strings.Contains(stderr, tt.wantErr) {
				t.Errorf("got stderr %q; want it to contain %q", stderr, tt.wantErr)
			}
			if !strings.Contains(stderr, "Run '"+tt.wantHelp+"' for usage.") {
				t.Errorf("got stderr %q; want the usage hint for %q", stderr, tt.wantHelp)
			}
			if stdout != "" {
				t.Errorf("got stdout %q; want nothing", stdout)
			}
		})
	}
}

func TestHelp(t *testing.T) {
	isolate(t)
	for _, args := range [][]string{nil, {"--help"}, {"alloc"}, {"node", "slots"}, {"help", "alloc", "create"}} {
		code, stdout, stderr := runCLI(t, context.Background(), args)
		if code != 0 || !strings.Contains(stdout, "Usage:") {
			t.Errorf("%v: got exit %d, stdout %q, stderr %q; want help and 0", args, code, stdout, stderr)
		}
	}
}

func TestHelpExitCodes(t *testing.T) {
	isolate(t)
	code, stdout, _ := runCLI(t, context.Background(), []string{"help", "exit-codes"})
	if code != 0 {
		t.Fatalf("got exit %d; want 0", code)
	}
	for _, e := range cmdutil.ExitCodes {
		if !strings.Contains(stdout, fmt.Sprintf("%3d  %s", e.Code, e.Name)) {
			t.Errorf("exit-codes help lacks %d %s:\n%s", e.Code, e.Name, stdout)
		}
	}
}

// failing is a command that returns err, to drive Main's error path.
func failing(err error) *cobra.Command {
	return &cobra.Command{Use: "fail", RunE: func(*cobra.Command, []string) error { return err }}
}

func TestAPIErrorsExitAndHint(t *testing.T) {
	isolate(t)
	for _, code := range api.Codes {
		t.Run(string(code), func(t *testing.T) {
			err := fmt.Errorf("alloc create: %w", api.Errorf(code, "it went %s", code))
			got, stdout, stderr := runCLI(t, context.Background(), []string{"fail"}, failing(err))
			if want := cmdutil.ExitCodeOf(err); got != want || want == 0 {
				t.Errorf("got exit %d; want %d", got, want)
			}
			if wantMsg := "error: alloc create: it went " + string(code) + "\n"; !strings.HasPrefix(stderr, wantMsg) {
				t.Errorf("got stderr %q; want it to start with %q", stderr, wantMsg)
			}
			if stdout != "" {
				t.Errorf("got stdout %q; want nothing", stdout)
			}
		})
	}
}

func TestHints(t *testing.T) {
	isolate(t)
	tests := []struct {
		name string
		err  error
		want string
	}{
		{"unauthenticated gets login hint", api.Errorf(api.CodeUnauthenticated, "no session"),
			"error: no session\nhint: run `gpuaas login`\n"},
		{"server hint kept", &api.Error{Code: api.CodeNoCapacity, Message: "no h100 free", Hint: "retry with --queue"},
			"error: no h100 free\nhint: retry with --queue\n"},
		{"plain error", errors.New("disk full"), "error: disk full\n"},
		{"declined prompt is quiet", cmdutil.ErrCancelled, ""},
		{"ssh's exit status is quiet", cmdutil.ExitStatus("ssh", 3), ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, _, stderr := runCLI(t, context.Background(), []string{"fail"}, failing(tt.err))
			if stderr != tt.want {
				t.Errorf("got stderr %q; want %q", stderr, tt.want)
			}
		})
	}
}

func TestInterrupted(t *testing.T) {
	isolate(t)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	code, _, stderr := runCLI(t, ctx, []string{"fail"}, failing(errors.New("read: interrupted system call")))
	if code != cmdutil.ExitInterrupted || stderr != "interrupted\n" {
		t.Errorf("got exit %d, stderr %q; want %d, interrupted", code, stderr, cmdutil.ExitInterrupted)
	}
}

func TestExitStatusPassesThrough(t *testing.T) {
	isolate(t)
	code, _, stderr := runCLI(t, context.Background(), []string{"fail"}, failing(cmdutil.ExitStatus("ssh", 255)))
	if code != 255 || stderr != "" {
		t.Errorf("got exit %d, stderr %q; want 255 and nothing printed (ssh printed its own error)", code, stderr)
	}
}

func TestUnreachableServer(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	url := "nats://" + l.Addr().String()
	l.Close()
	isolate(t)
	t.Setenv(clientconfig.EnvServer, url)
	code, _, stderr := runCLI(t, context.Background(), []string{"catalog", "list"})
	if code != cmdutil.ExitUnavailable {
		t.Errorf("got exit %d; want %d", code, cmdutil.ExitUnavailable)
	}
	if want := "hint: is `gpuaas dev` or controld running? server is " + url; !strings.Contains(stderr, want) {
		t.Errorf("got stderr %q; want %q", stderr, want)
	}
}

func TestExtraCommandsAreGrouped(t *testing.T) {
	isolate(t)
	dev := &cobra.Command{Use: "dev", Short: "Run everything in one process", Run: func(*cobra.Command, []string) {}}
	_, stdout, _ := runCLI(t, context.Background(), []string{"--help"}, dev)
	if !strings.Contains(stdout, "Daemons:\n  dev") {
		t.Errorf("got help\n%s\nwant dev under Daemons", stdout)
	}
}
