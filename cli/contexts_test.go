package cli

import (
	"context"
	"net"
	"strings"
	"testing"

	"github.com/gpuaas/gpuaas/cli/cmdutil"
	"github.com/gpuaas/gpuaas/internal/clientconfig"
)

// deadServer is a NATS URL where nothing listens.
func deadServer(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return "nats://" + l.Addr().String()
}

// TestContextsPickTheServer: contexts added with `gpuaas context add` decide
// which server a command dials, by `context use`, --context and
// GPUAAS_CONTEXT, in that order of precedence (flag, env, file).
func TestContextsPickTheServer(t *testing.T) {
	isolate(t)
	ctx := context.Background()
	lab, prod := deadServer(t), deadServer(t)
	for _, args := range [][]string{
		{"context", "add", "lab", "--server", lab},
		{"context", "add", "prod", "--server", prod},
	} {
		if code, _, stderr := runCLI(t, ctx, args); code != 0 {
			t.Fatalf("%v: exit %d: %s", args, code, stderr)
		}
	}
	dials := func(args ...string) string {
		t.Helper()
		code, _, stderr := runCLI(t, ctx, args)
		if code != cmdutil.ExitUnavailable {
			t.Fatalf("%v: exit %d (%s); want unavailable", args, code, stderr)
		}
		switch {
		case strings.Contains(stderr, lab):
			return "lab"
		case strings.Contains(stderr, prod):
			return "prod"
		}
		t.Fatalf("%v: stderr %q names neither server", args, stderr)
		return ""
	}
	if got := dials("catalog", "list"); got != "lab" {
		t.Fatalf("the first context added: dialled %s; want lab", got)
	}
	if code, _, stderr := runCLI(t, ctx, []string{"context", "use", "prod"}); code != 0 {
		t.Fatalf("context use: exit %d: %s", code, stderr)
	}
	if got := dials("catalog", "list"); got != "prod" {
		t.Fatalf("after `context use prod`: dialled %s; want prod", got)
	}
	t.Setenv(clientconfig.EnvContext, "lab")
	if got := dials("catalog", "list"); got != "lab" {
		t.Fatalf("with GPUAAS_CONTEXT=lab: dialled %s; want lab", got)
	}
	if got := dials("--context", "prod", "catalog", "list"); got != "prod" {
		t.Fatalf("with --context prod over GPUAAS_CONTEXT=lab: dialled %s; want prod", got)
	}
	_, stdout, _ := runCLI(t, ctx, []string{"context", "list", "--jq", ".[] | select(.current) | .name"})
	if stdout != "lab\n" {
		t.Fatalf("context list under GPUAAS_CONTEXT=lab marks %q current; want lab", stdout)
	}
	code, _, stderr := runCLI(t, ctx, []string{"--context", "nope", "catalog", "list"})
	if code != cmdutil.ExitUsage || !strings.Contains(stderr, `no context "nope"`) || !strings.Contains(stderr, "lab, prod") {
		t.Fatalf("--context nope: exit %d, stderr %q; want a usage error naming the known contexts", code, stderr)
	}
}

func TestVersion(t *testing.T) {
	isolate(t)
	code, stdout, _ := runCLI(t, context.Background(), []string{"--version"})
	if code != 0 || stdout != "gpuaas version "+Version+"\n" {
		t.Fatalf("--version: exit %d, stdout %q; want the version", code, stdout)
	}
}
