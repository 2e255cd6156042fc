package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/spf13/cobra"

	"github.com/gpuaas/gpuaas/cli/cmdutil"
	"github.com/gpuaas/gpuaas/controld/controldtest"
	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/clientconfig"
)

// runTerm runs the command tree like runCLI, with stdout (and stdin and
// stderr) a terminal when tty is set, and colour on unless noColor.
func runTerm(t *testing.T, tty, noColor bool, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	ios, _, out, errOut := cmdutil.Test()
	ios.SetStdinTTY(tty)
	ios.SetStdoutTTY(tty)
	ios.SetStderrTTY(tty)
	ios.SetNoColor(noColor)
	f := NewFactory(ios)
	defer f.Close()
	code = run(context.Background(), f, args)
	return code, out.String(), errOut.String()
}

var ansi = regexp.MustCompile("\x1b\\[[0-9;]*m")

// TestAllocListOutput drives `gpuaas alloc list` against a real controld,
// on a terminal and piped, in every output form: table, TSV, --json
// fields, --jq and --template. Data goes to stdout, nothing to stderr.
func TestAllocListOutput(t *testing.T) {
	env := controldtest.Start(t, controldtest.Options{})
	c := env.Client(env.AdminToken)
	var ids []string
	for range 2 {
		a, err := c.AllocCreate(t.Context(), api.AllocCreateRequest{SKU: "h200-slice", GPUs: 1})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, a.ID)
	}
	list, err := c.AllocList(t.Context(), api.AllocListRequest{})
	if err != nil {
		t.Fatal(err)
	}
	isolate(t)
	t.Setenv(clientconfig.EnvServer, env.NATSURL)
	t.Setenv(clientconfig.EnvToken, env.AdminToken)
	t.Setenv(clientconfig.EnvProject, env.Project.Name)

	// What each form must print, derived from the API's answer.
	var idLines, tmplLines strings.Builder
	type idState struct {
		ID    string `json:"id"`
		State string `json:"state"`
	}
	var pairs []idState
	for _, a := range list.Allocations {
		fmt.Fprintln(&idLines, a.ID)
		fmt.Fprintf(&tmplLines, "%s %s\n", a.ID, a.State)
		pairs = append(pairs, idState{a.ID, a.State})
	}
	if len(pairs) != 2 {
		t.Fatalf("alloc list has %d allocations; want the 2 created", len(pairs))
	}
	wantJSON := func(t *testing.T, stdout string, tty bool) {
		t.Helper()
		var got []idState
		if err := json.Unmarshal([]byte(stdout), &got); err != nil {
			t.Fatalf("--json output %q: %v", stdout, err)
		}
		if !slices.Equal(got, pairs) {
			t.Fatalf("--json got %+v; want %+v", got, pairs)
		}
		var keys []map[string]any
		_ = json.Unmarshal([]byte(stdout), &keys)
		if len(keys[0]) != 2 {
			t.Fatalf("--json id,state got fields %v; want only id and state", keys[0])
		}
		if indented := strings.Contains(stdout, "\n  "); indented != tty {
			t.Fatalf("--json indented=%v on tty=%v; want indented on a terminal only:\n%s", indented, tty, stdout)
		}
	}

	for _, tty := range []bool{false, true} {
		name := map[bool]string{false: "piped", true: "tty"}[tty]
		t.Run(name+"/table", func(t *testing.T) {
			code, stdout, stderr := runTerm(t, tty, true, "alloc", "list")
			if code != 0 || stderr != "" {
				t.Fatalf("exit %d, stderr %q", code, stderr)
			}
			lines := strings.Split(strings.TrimSuffix(stdout, "\n"), "\n")
			if tty {
				// A header, then aligned columns (spaces, no tabs).
				if len(lines) != 3 || !strings.HasPrefix(lines[0], "ID") || !strings.Contains(lines[0], "STATE") || strings.Contains(stdout, "\t") {
					t.Fatalf("got\n%s\nwant a header and two aligned rows", stdout)
				}
			} else {
				// No header; tab-separated id, state, sku, gpus, node, created, project.
				if len(lines) != 2 {
					t.Fatalf("got %q; want two TSV rows", stdout)
				}
				for i, l := range lines {
					f := strings.Split(l, "\t")
					if len(f) != 7 || f[0] != pairs[i].ID || f[1] != pairs[i].State || f[2] != "h200-slice" || f[3] != "1" || f[6] == "" {
						t.Fatalf("row %q; want id, state, sku, gpus, node, created, project of %+v", l, pairs[i])
					}
				}
			}
			if ansi.MatchString(stdout) {
				t.Fatalf("got colour escapes with colour off (NO_COLOR):\n%q", stdout)
			}
		})
		t.Run(name+"/json fields", func(t *testing.T) {
			// `--json id,state` as two arguments, as people type it.
			code, stdout, stderr := runTerm(t, tty, true, "alloc", "list", "--json", "id,state")
			if code != 0 || stderr != "" {
				t.Fatalf("exit %d, stderr %q", code, stderr)
			}
			wantJSON(t, stdout, tty)
		})
		t.Run(name+"/jq", func(t *testing.T) {
			code, stdout, stderr := runTerm(t, tty, true, "alloc", "list", "--jq", ".[].id")
			if code != 0 || stderr != "" || stdout != idLines.String() {
				t.Fatalf("exit %d, stdout %q, stderr %q; want %q", code, stdout, stderr, idLines.String())
			}
		})
		t.Run(name+"/template", func(t *testing.T) {
			code, stdout, stderr := runTerm(t, tty, true, "alloc", "list", "--template", `{{range .}}{{.id}} {{.state}}{{"\n"}}{{end}}`)
			if code != 0 || stderr != "" || stdout != tmplLines.String() {
				t.Fatalf("exit %d, stdout %q, stderr %q; want %q", code, stdout, stderr, tmplLines.String())
			}
		})
	}
	t.Run("tty/colour", func(t *testing.T) {
		_, stdout, _ := runTerm(t, true, false, "alloc", "list")
		if !ansi.MatchString(stdout) {
			t.Fatalf("got no colour on a terminal with colour on:\n%q", stdout)
		}
		if plain := ansi.ReplaceAllString(stdout, ""); !strings.Contains(plain, ids[0]) {
			t.Fatalf("got %q; want the allocations listed", plain)
		}
		_, piped, _ := runTerm(t, false, false, "alloc", "list")
		if ansi.MatchString(piped) {
			t.Fatalf("got colour escapes when piped:\n%q", piped)
		}
	})
	t.Run("bad jq is a usage error", func(t *testing.T) {
		code, stdout, stderr := runTerm(t, false, true, "alloc", "list", "--jq", ".[")
		if code != cmdutil.ExitUsage || stdout != "" || !strings.Contains(stderr, "--jq") {
			t.Fatalf("exit %d, stdout %q, stderr %q; want a usage error about --jq", code, stdout, stderr)
		}
	})
}

// readVerbs are the command names that only read and print data.
var readVerbs = []string{"list", "get", "members", "whoami"}

// TestReadCommandsHaveOutputFlags: every read command takes --json,
// --jq and --template (the one output path), so a new one cannot ship
// without them.
func TestReadCommandsHaveOutputFlags(t *testing.T) {
	isolate(t)
	ios, _, _, _ := cmdutil.Test()
	var checked []string
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		for _, sub := range c.Commands() {
			walk(sub)
		}
		if c.HasSubCommands() || !slices.Contains(readVerbs, c.Name()) {
			return
		}
		checked = append(checked, c.CommandPath())
		for _, flag := range []string{"json", "jq", "template"} {
			if c.Flags().Lookup(flag) == nil {
				t.Errorf("%s has no --%s", c.CommandPath(), flag)
			}
		}
	}
	walk(Root(NewFactory(ios)))
	for _, want := range []string{"gpuaas alloc list", "gpuaas alloc get", "gpuaas whoami", "gpuaas project members",
		"gpuaas catalog list", "gpuaas node list", "gpuaas session list", "gpuaas ops ca list", "gpuaas context list"} {
		if !slices.Contains(checked, want) {
			t.Errorf("%s was not checked; checked %v", want, checked)
		}
	}
}
