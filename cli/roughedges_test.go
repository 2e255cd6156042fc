package cli

import (
	"context"
	"regexp"
	"strings"
	"testing"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/gpuaas/gpuaas/cli/cmdutil"
	"github.com/gpuaas/gpuaas/controld/controldtest"
	"github.com/gpuaas/gpuaas/controld/sessions"
	"github.com/gpuaas/gpuaas/internal/clientconfig"
	"github.com/gpuaas/gpuaas/internal/ids"
)

// TestGPUsAbcIsAUsageError: `--gpus abc` said
// `strconv.ParseInt: parsing "abc": invalid syntax`.
func TestGPUsAbcIsAUsageError(t *testing.T) {
	isolate(t)
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"int", []string{"alloc", "create", "--sku", "h100-slice", "--gpus", "abc"}, `invalid value "abc" for --gpus: it takes a whole number`},
		{"duration", []string{"alloc", "create", "--sku", "h100-slice", "--timeout", "soon"}, `invalid value "soon" for --timeout: it takes a duration such as 90s, 5m or 1h30m`},
		{"float", []string{"session", "play", "ts-1", "--speed", "fast"}, `invalid value "fast" for --speed: it takes a number`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, _, stderr := runCLI(t, context.Background(), tt.args)
			if code != cmdutil.ExitUsage {
				t.Errorf("got exit %d; want %d", code, cmdutil.ExitUsage)
			}
			if !strings.Contains(stderr, tt.want) {
				t.Errorf("got stderr %q; want it to contain %q", stderr, tt.want)
			}
			if strings.Contains(stderr, "strconv") || strings.Contains(stderr, "time: invalid") {
				t.Errorf("got stderr %q; want no Go parser error", stderr)
			}
		})
	}
}

// TestJSONUnknownFieldNamed: `--json id,nosuch` said "unexpected argument
// "id,nosuch"" instead of naming the field and the valid ones.
func TestJSONUnknownFieldNamed(t *testing.T) {
	isolate(t)
	for _, args := range [][]string{
		{"alloc", "list", "--json", "id,nosuch"},
		{"alloc", "list", "--json=id,nosuch"},
		{"catalog", "list", "--json", "nosuch"},
	} {
		code, _, stderr := runCLI(t, context.Background(), args)
		if code != cmdutil.ExitUsage {
			t.Errorf("%v: got exit %d; want %d", args, code, cmdutil.ExitUsage)
		}
		if !strings.Contains(stderr, `unknown JSON field "nosuch"; available: id, `) {
			t.Errorf("%v: got stderr %q; want the unknown field and the available ones", args, stderr)
		}
		if strings.Contains(stderr, "unexpected argument") {
			t.Errorf("%v: got stderr %q; want no \"unexpected argument\"", args, stderr)
		}
	}
	// With an argument beside it, the likelier field list is named.
	for _, args := range [][]string{
		{"alloc", "get", "a-1", "--json", "id,nosuch"},
		{"alloc", "get", "--json", "id,nosuch", "a-1"},
		{"alloc", "get", "a-1", "--json", "nosuch"},
	} {
		code, _, stderr := runCLI(t, context.Background(), args)
		if code != cmdutil.ExitUsage || !strings.Contains(stderr, `unknown JSON field "nosuch"`) {
			t.Errorf("%v: got exit %d, stderr %q; want nosuch named", args, code, stderr)
		}
	}
}

// clipped matches a value cut by internal/clip.
var clipped = regexp.MustCompile(`a{40}…\[\d{6} bytes\]`)

// TestLongFlagValueNotEchoed: a 100 KB --sku came back in full in the
// error message.
func TestLongFlagValueNotEchoed(t *testing.T) {
	isolate(t)
	long := strings.Repeat("a", 100<<10)
	for _, args := range [][]string{
		{"alloc", "create", "--sku", "h100-slice", "--gpus", long},
		{"alloc", "list", "--json", long},
		{long},
	} {
		_, _, stderr := runCLI(t, context.Background(), args)
		if len(stderr) > 1024 || !clipped.MatchString(stderr) {
			t.Errorf("%.40q…: got %d bytes of stderr (%.300q); want the value cut, with its size", args, len(stderr), stderr)
		}
	}
}

// TestDevHelpNoBackquoteInUsage: `gpuaas dev --help` rendered
// "--oidc-client-id gpuaas login": pflag takes a backquoted word in a
// flag's usage as the name of its value. In the whole tree, a flag's
// value name is one word.
func TestDevHelpNoBackquoteInUsage(t *testing.T) {
	isolate(t)
	ios, _, out, errOut := cmdutil.Test()
	f := NewFactory(ios)
	defer f.Close()
	if code := run(context.Background(), f, []string{"dev", "--help"}, daemonCommands(f)...); code != 0 {
		t.Fatalf("gpuaas dev --help: exit %d, stderr %q", code, errOut)
	}
	stdout := out.String()
	for _, want := range []string{"--oidc-client-id id ", "--oidc-issuer URL "} {
		if !strings.Contains(stdout, want) {
			t.Errorf("gpuaas dev --help: want %q in\n%s", want, stdout)
		}
	}
	if strings.Contains(stdout, "--oidc-client-id gpuaas login") {
		t.Errorf("gpuaas dev --help still renders the backquoted text as the value name:\n%s", stdout)
	}

	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		c.LocalFlags().VisitAll(func(fl *pflag.Flag) {
			if name, _ := pflag.UnquoteUsage(fl); strings.ContainsAny(name, " `") {
				t.Errorf("%s --%s: value name %q; want one word (a backquote in the usage?)", c.CommandPath(), fl.Name, name)
			}
		})
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(Root(f))
}

// sessionIDLike matches a word of an example that is a session id, real
// (ts-…) or not (s-…).
var sessionIDLike = regexp.MustCompile(`\bt?s-[0-9a-z]+\b`)

// TestSessionExamplesUseTSIDs: the help examples of `gpuaas session` used
// s- ids, while terminal session ids are ts- (controld/sessions.IDPrefix).
func TestSessionExamplesUseTSIDs(t *testing.T) {
	isolate(t)
	ios, _, _, _ := cmdutil.Test()
	f := NewFactory(ios)
	defer f.Close()
	session, _, err := Root(f).Find([]string{"session"})
	if err != nil {
		t.Fatal(err)
	}
	seen := 0
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		for _, id := range sessionIDLike.FindAllString(c.Example+"\n"+c.Long, -1) {
			seen++
			if !ids.Valid(sessions.IDPrefix, id) {
				t.Errorf("%s: example id %q; want a %s- id as controld makes them", c.CommandPath(), id, sessions.IDPrefix)
			}
		}
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(session)
	if seen == 0 {
		t.Error("no session id in the examples of gpuaas session; want `gpuaas session play ts-…`")
	}
}

// TestLongSKUNotEchoed: a 100 KB --sku came back in full. Against a real
// controld, whether the CLI (looking the SKU up for its GPU count) or
// controld refuses it, the message quotes its start and its size.
func TestLongSKUNotEchoed(t *testing.T) {
	env := controldtest.Start(t, controldtest.Options{NoNodes: true})
	isolate(t)
	t.Setenv(clientconfig.EnvServer, env.NATSURL)
	t.Setenv(clientconfig.EnvToken, env.AdminToken)
	t.Setenv(clientconfig.EnvProject, env.Project.Name)
	long := strings.Repeat("a", 100<<10)
	for _, args := range [][]string{
		{"alloc", "create", "--sku", long, "--gpus", "1"}, // refused by controld
		{"alloc", "create", "--sku", long},                // refused by the CLI's catalog lookup
		{"alloc", "get", long},
	} {
		code, _, stderr := runCLI(t, context.Background(), args)
		if code == 0 || len(stderr) > 1024 || !clipped.MatchString(stderr) {
			t.Errorf("%.40q…: got exit %d, %d bytes of stderr (%.300q); want an error with the value cut, with its size",
				args, code, len(stderr), stderr)
		}
	}
}
