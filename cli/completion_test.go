package cli

import (
	"context"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/gpuaas/gpuaas/cli/cmdutil"
	"github.com/gpuaas/gpuaas/controld/controldtest"
	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/clientconfig"
	"github.com/gpuaas/gpuaas/internal/gateproto"
	"github.com/gpuaas/gpuaas/internal/sshkeys/sshkeystest"
	"github.com/gpuaas/gpuaas/internal/testutil"
)

// complete runs cobra's hidden __complete command, as the shell scripts
// in completions/ do at each Tab, and returns the offered values (without
// their descriptions), the directive line and stderr.
func complete(t *testing.T, args ...string) (values []string, directive, stderr string) {
	t.Helper()
	code, stdout, stderr := runCLI(t, context.Background(), append([]string{"__complete"}, args...))
	if code != 0 {
		t.Fatalf("__complete %q: exit %d, stderr %q", args, code, stderr)
	}
	lines := strings.Split(strings.TrimSuffix(stdout, "\n"), "\n")
	directive = lines[len(lines)-1]
	for _, l := range lines[:len(lines)-1] {
		values = append(values, strings.SplitN(l, "\t", 2)[0])
	}
	return values, directive, stderr
}

// directiveNoFile and directiveErrorNoFile are cobra's directive lines:
// ShellCompDirectiveNoFileComp, and that with ShellCompDirectiveError.
const (
	directiveNoFile      = ":4"
	directiveErrorNoFile = ":5"
)

// TestCompletionTableMatchesTree: every command and flag the completion
// table names exists in the tree and completes.
func TestCompletionTableMatchesTree(t *testing.T) {
	isolate(t)
	ios, _, _, _ := cmdutil.Test()
	f := NewFactory(ios)
	defer f.Close()
	root := Root(f)
	for path := range argCompletions {
		cmd, err := findCommand(root, path)
		if err != nil || cmd.ValidArgsFunction == nil {
			t.Errorf("%s: got %v; want a command completing its argument", path, err)
		}
	}
	for path, flags := range flagCompletions {
		cmd, err := findCommand(root, path)
		if err != nil {
			t.Errorf("%s: %v", path, err)
			continue
		}
		for name := range flags {
			if _, ok := cmd.GetFlagCompletionFunc(name); !ok {
				t.Errorf("%s --%s: no completion", path, name)
			}
		}
	}
	if _, ok := root.GetFlagCompletionFunc("project"); !ok {
		t.Error("--project: no completion")
	}
}

// TestShellCompletionFromServer: allocation ids, SKUs, projects, node
// names and session ids complete from a real controld, through cobra's
// __complete as the shells call it; only what matches the typed prefix,
// only where an argument is still expected, and never files.
func TestShellCompletionFromServer(t *testing.T) {
	env := controldtest.Start(t, controldtest.Options{})
	ctx := t.Context()
	admin := env.Client(env.AdminToken)
	a, err := admin.AllocCreate(ctx, api.AllocCreateRequest{SKU: "h200-slice", GPUs: 1})
	if err != nil {
		t.Fatal(err)
	}
	gw, _ := env.Gateway(t, "gw-complete")
	sess, err := gateproto.SessionStart(ctx, gw, gateproto.SessionStartRequest{UserID: env.Admin.ID, AllocationID: a.ID,
		Kind: api.SessionShell, Gateway: "gw-complete"})
	if err != nil {
		t.Fatal(err)
	}
	nodes, err := admin.NodeList(ctx)
	if err != nil || len(nodes.Nodes) == 0 {
		t.Fatalf("node list: %v, %v", nodes, err)
	}
	var nodeNames []string
	for _, n := range nodes.Nodes {
		nodeNames = append(nodeNames, n.Name)
	}
	slices.Sort(nodeNames)
	cat, err := admin.CatalogList(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var skus, h200 []string
	for _, s := range cat.SKUs {
		skus = append(skus, s.ID)
		if strings.HasPrefix(s.ID, "h200") {
			h200 = append(h200, s.ID)
		}
	}

	isolate(t)
	t.Setenv(clientconfig.EnvServer, env.NATSURL)
	t.Setenv(clientconfig.EnvToken, env.AdminToken)
	t.Setenv(clientconfig.EnvProject, env.Project.Name)
	tests := []struct {
		name string
		args []string
		want []string
	}{
		{"alloc get", []string{"alloc", "get", ""}, []string{a.ID}},
		{"alloc release by prefix", []string{"alloc", "release", "a-"}, []string{a.ID}},
		{"alloc wait, other prefix", []string{"alloc", "wait", "zz"}, nil},
		{"alloc get, argument given", []string{"alloc", "get", a.ID, ""}, nil},
		{"ssh", []string{"ssh", ""}, []string{a.ID}},
		{"session list --alloc", []string{"session", "list", "--alloc", ""}, []string{a.ID}},
		{"watch --alloc", []string{"watch", "--alloc", ""}, []string{a.ID}},
		{"alloc create --sku", []string{"alloc", "create", "--sku", ""}, skus},
		{"alloc create --sku by prefix", []string{"alloc", "create", "--sku", "h200"}, h200},
		{"--project", []string{"alloc", "list", "--project", ""}, []string{env.Project.Name}},
		{"-p", []string{"alloc", "list", "-p", ""}, []string{env.Project.Name}},
		{"project use", []string{"project", "use", ""}, []string{env.Project.Name}},
		{"node get", []string{"node", "get", ""}, nodeNames},
		{"node drain", []string{"node", "drain", ""}, nodeNames},
		{"node logs", []string{"node", "logs", ""}, nodeNames},
		{"session play", []string{"session", "play", ""}, []string{sess.ID}},
		{"session play by prefix", []string{"session", "play", "ts-"}, []string{sess.ID}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, directive, _ := complete(t, tt.args...)
			if !slices.Equal(got, tt.want) || directive != directiveNoFile {
				t.Errorf("got %q %s; want %q %s", got, directive, tt.want, directiveNoFile)
			}
		})
	}
	if !strings.HasPrefix(sess.ID, "ts-") {
		t.Errorf("got session id %q; want ts-…", sess.ID)
	}

	// A user who is not an operator gets no node names, quietly.
	_, bobToken := env.AddUser(t, "bob@example.test", api.RoleUser)
	t.Setenv(clientconfig.EnvToken, bobToken)
	got, directive, stderr := complete(t, "node", "get", "")
	if len(got) != 0 || directive != directiveErrorNoFile || strings.Contains(stderr, "error") {
		t.Errorf("node get as a user: got %q %s, stderr %q; want nothing, quietly", got, directive, stderr)
	}
}

// TestShellCompletionQuietOnError: with no server, or one that never
// answers, completion offers nothing, prints nothing of its own and gives
// up after cmdutil.CompletionTimeout, not the client's 15 s.
func TestShellCompletionQuietOnError(t *testing.T) {
	isolate(t)
	t.Setenv(clientconfig.EnvToken, sshkeystest.Token) // a session token in form; no server knows it

	// Nothing listens.
	t.Setenv(clientconfig.EnvServer, "nats://127.0.0.1:1")
	for _, args := range [][]string{{"alloc", "get", ""}, {"alloc", "create", "--sku", ""}, {"session", "play", ""}} {
		got, directive, stderr := complete(t, args...)
		if len(got) != 0 || directive != directiveErrorNoFile || !onlyCobraDebugLine(stderr) {
			t.Errorf("%q with no server: got %q %s, stderr %q; want nothing, quietly", args, got, directive, stderr)
		}
	}

	// A server where the API is subscribed to but never answers.
	bus := testutil.PlainNATS(t)
	hung := testutil.Connect(t, bus.URL)
	var asked atomic.Int32
	if _, err := hung.Subscribe(api.Subject(">"), func(*nats.Msg) { asked.Add(1) }); err != nil {
		t.Fatal(err)
	}
	if err := hung.Flush(); err != nil {
		t.Fatal(err)
	}
	t.Setenv(clientconfig.EnvServer, bus.URL)
	start := time.Now()
	got, directive, stderr := complete(t, "alloc", "get", "")
	if took := time.Since(start); took >= api.DefaultTimeout {
		t.Errorf("completion took %v against a server that never answers; want it to give up after about %v", took, cmdutil.CompletionTimeout)
	}
	if asked.Load() == 0 {
		t.Error("the hung server got no request; want the completion to have asked it")
	}
	if len(got) != 0 || directive != directiveErrorNoFile || !onlyCobraDebugLine(stderr) {
		t.Errorf("hung server: got %q %s, stderr %q; want nothing, quietly", got, directive, stderr)
	}
}

// onlyCobraDebugLine reports whether stderr holds nothing but the line
// cobra's __complete always writes there (the shell scripts discard it).
func onlyCobraDebugLine(stderr string) bool {
	return stderr == "" || (strings.HasPrefix(stderr, "Completion ended with directive:") && strings.Count(stderr, "\n") == 1)
}
