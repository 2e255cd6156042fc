package e2e

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/gpuaas/gpuaas/internal/testutil"
)

// gatewaySSH runs gpuaas commands through the gateway with the system
// OpenSSH client and the config `gpuaas ssh-config` wrote, as a user
// would: `ssh gpuaas-dev <command>`.
type gatewaySSH struct {
	t      *testing.T
	config string
}

// run runs `ssh -F config gpuaas-dev args...` with no stdin and returns
// its stdout, stderr and exit status.
func (g gatewaySSH) run(args ...string) (stdout, stderr string, code int) {
	g.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "ssh", append([]string{"-F", g.config, "-o", "BatchMode=yes", "gpuaas-dev"}, args...)...)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		return out.String(), errOut.String(), exit.ExitCode()
	}
	if err != nil {
		g.t.Fatalf("ssh %v: %v", args, err)
	}
	return out.String(), errOut.String(), 0
}

// TestCommandsOverSSHWorkLikeLocalOnes is commands over SSH (README) against `gpuaas dev`
// with the system OpenSSH client, after `gpuaas login` and
// `gpuaas ssh-config`: every subtest is one bug a new user hit, named
// after it.
func TestCommandsOverSSHWorkLikeLocalOnes(t *testing.T) {
	if _, err := exec.LookPath("ssh"); err != nil {
		t.Fatalf("ssh is not installed (apt-get install openssh-client): %v", err)
	}
	dev, cfg := loggedInDev(t)
	if r := dev.gpuaas(t, "", "ssh-config"); r.code != 0 {
		t.Fatalf("ssh-config: exit %d %s", r.code, r.stderr)
	}
	sshConfig := filepath.Join(cfg, "ssh", "dev", "config")
	gw := gatewaySSH{t: t, config: sshConfig}
	local := func(t *testing.T, args ...string) string {
		t.Helper()
		r := dev.gpuaas(t, "", args...)
		if r.code != 0 {
			t.Fatalf("gpuaas %s: exit %d\n%s", strings.Join(args, " "), r.code, r.stderr)
		}
		return strings.TrimSpace(r.stdout)
	}
	over := func(t *testing.T, args ...string) string {
		t.Helper()
		out, errOut, code := gw.run(args...)
		if code != 0 {
			t.Fatalf("ssh gpuaas-dev %s: exit %d\n%s%s", strings.Join(args, " "), code, out, errOut)
		}
		return strings.TrimSpace(out)
	}
	// A second project, funded so allocations could run in it; the
	// admin's default stays dev (the first project is one's default).
	local(t, "project", "create", "ml-team")
	local(t, "admin", "credit", "-p", "ml-team", "--amount", "20", "--reason", "e2e")
	projectIDs := map[string]string{}
	for _, line := range strings.Split(local(t, "project", "list", "--json", "id,name", "--jq", `.[] | .name + " " + .id`), "\n") {
		name, id, _ := strings.Cut(line, " ")
		projectIDs[name] = id
	}
	if projectIDs["dev"] == "" || projectIDs["ml-team"] == "" {
		t.Fatalf("projects: %v; want dev and ml-team", projectIDs)
	}
	defaultProject := func(t *testing.T) string {
		return local(t, "whoami", "--json", "default_project", "--jq", ".default_project.name")
	}
	var allocID string

	// `ssh gpuaas@gateway alloc create --sku h200-slice --gpus 1 -p dev`
	// failed with "no project given": the flag never reached the API.
	t.Run("AllocCreateOverSSHTakesProjectFlag", func(t *testing.T) {
		for _, flag := range []string{"-p", "--project"} {
			// ml-team is not the default: only the flag can name it.
			got := over(t, "alloc", "create", "--sku", "h200-slice", "--gpus", "1", flag, "ml-team", "--dry-run",
				"--json", "project_id", "--jq", ".project_id")
			if got != projectIDs["ml-team"] {
				t.Errorf("alloc create %s ml-team --dry-run over SSH: project %q; want ml-team's %s", flag, got, projectIDs["ml-team"])
			}
		}
		// (ssh joins its arguments with spaces: an expression without any
		// survives the trip unquoted.)
		got := over(t, "alloc", "create", "--sku", "h200-slice", "--gpus", "1", "-p", "dev", "--json", "id,project_id",
			"--jq", `[.id,.project_id]|@tsv`)
		id, project, _ := strings.Cut(got, "\t")
		if !strings.HasPrefix(id, "a-") || project != projectIDs["dev"] {
			t.Fatalf("alloc create -p dev over SSH: %q; want a new allocation in dev (%s)", got, projectIDs["dev"])
		}
		allocID = id
		// Bad input: a clear error, and nothing created.
		before := local(t, "alloc", "list", "--json", "id", "--jq", "length")
		_, errOut, code := gw.run("alloc", "create", "--sku", "h200-slice", "--gpus", "1", "-p", "nope")
		if code != 6 || !strings.Contains(errOut, `project "nope" not found`) {
			t.Errorf("alloc create -p nope over SSH: exit %d %q; want 6 (not found) naming the project", code, errOut)
		}
		if after := local(t, "alloc", "list", "--json", "id", "--jq", "length"); after != before {
			t.Errorf("allocations after a refused create: %s; want %s", after, before)
		}
	})

	// The hint's `project use` failed over SSH with `save config: no path
	// (use Load)`: the default project is now the server's, so it follows
	// the user to every machine and over SSH.
	t.Run("ProjectUseOverSSHSetsServerSideDefault", func(t *testing.T) {
		if got := defaultProject(t); got != "dev" {
			t.Fatalf("default project before: %q; want dev (the seeded user's first project)", got)
		}
		_, errOut, code := gw.run("project", "use", "ml-team")
		if code != 0 || !strings.Contains(errOut, "Your default project is now ml-team") || strings.Contains(errOut, "save config") {
			t.Fatalf("project use over SSH: exit %d %q; want 0 and the new default", code, errOut)
		}
		if got := defaultProject(t); got != "ml-team" {
			t.Errorf("default project seen locally after project use over SSH: %q; want ml-team", got)
		}
		// Commands that name no project follow it, here and over SSH.
		if got := local(t, "billing", "balance", "--json", "project", "--jq", ".project"); got != "ml-team" {
			t.Errorf("local billing balance: project %q; want ml-team", got)
		}
		if got := over(t, "billing", "balance", "--json", "project", "--jq", ".project"); got != "ml-team" {
			t.Errorf("billing balance over SSH: project %q; want ml-team", got)
		}
		if got := over(t, "alloc", "create", "--sku", "h200-slice", "--gpus", "1", "--dry-run", "--json", "project_id",
			"--jq", ".project_id"); got != projectIDs["ml-team"] {
			t.Errorf("alloc create --dry-run over SSH without -p: project %q; want ml-team's", got)
		}
		// Bad input: a clear error, and the default stays.
		_, errOut, code = gw.run("project", "use", "nope")
		if code != 6 || !strings.Contains(errOut, "not found") {
			t.Errorf("project use nope over SSH: exit %d %q; want 6 (not found)", code, errOut)
		}
		if got := defaultProject(t); got != "ml-team" {
			t.Errorf("default project after a refused project use: %q; want ml-team", got)
		}
		// Set locally, seen over SSH.
		r := dev.gpuaas(t, "", "project", "use", "dev")
		if r.code != 0 || !strings.Contains(r.stderr, "Your default project is now dev") {
			t.Fatalf("local project use dev: exit %d %s", r.code, r.stderr)
		}
		if got := over(t, "billing", "balance", "--json", "project", "--jq", ".project"); got != "dev" {
			t.Errorf("billing balance over SSH after a local project use: %q; want dev", got)
		}
	})

	// whoami over SSH reported `server nats://127.0.0.1:4222` (the
	// built-in default) wherever the server was.
	t.Run("WhoamiOverSSHReportsRealServer", func(t *testing.T) {
		server := local(t, "context", "list", "--json", "name,server", "--jq", `.[] | select(.name == "dev") | .server`)
		if server == "" || server == "nats://127.0.0.1:4222" {
			t.Fatalf("the dev context's server %q: want the random port gpuaas dev listens on", server)
		}
		rows := map[string]string{}
		for _, line := range strings.Split(over(t, "whoami"), "\n") {
			k, v, _ := strings.Cut(line, "\t")
			rows[k] = v
		}
		if rows["server"] != server {
			t.Errorf("whoami over SSH: server %q; want %q (rows %v)", rows["server"], server, rows)
		}
		if rows["project"] != "dev" || rows["email"] == "" {
			t.Errorf("whoami over SSH: project %q, email %q; want dev and the user's email", rows["project"], rows["email"])
		}
	})

	// `billing` was an unknown command over SSH, and `billing balance -p
	// dev` was refused locally ("unknown shorthand flag 'p'").
	t.Run("BillingOverSSHAndProjectShorthand", func(t *testing.T) {
		if got := local(t, "billing", "balance", "-p", "ml-team", "--json", "project", "--jq", ".project"); got != "ml-team" {
			t.Errorf("local billing balance -p ml-team: %q; want ml-team", got)
		}
		if got := over(t, "billing", "balance", "-p", "ml-team", "--json", "project", "--jq", ".project"); got != "ml-team" {
			t.Errorf("billing balance -p ml-team over SSH: %q; want ml-team", got)
		}
		if got := over(t, "billing", "ledger", "--project", "ml-team", "--json", "kind", "--jq", ".[0].kind"); got != "adjustment" {
			t.Errorf("billing ledger --project ml-team over SSH: first entry %q; want the adjustment (admin credit)", got)
		}
		over(t, "billing", "usage", "-p", "dev")
		_, errOut, code := gw.run("billing", "balance", "-p", "nope")
		if code != 6 || !strings.Contains(errOut, `project "nope" not found`) {
			t.Errorf("billing balance -p nope over SSH: exit %d %q; want 6 (not found)", code, errOut)
		}
	})

	// Reaching the gateway's TUI took `ssh -t gpuaas@gpuaas-dev`, known
	// only from an error text; the TUI showed no balance ("—") and
	// `<gateway>` for the ssh command line.
	t.Run("SSHConfigHasGatewayHostForTUIAndCommands", func(t *testing.T) {
		if allocID == "" {
			t.Skip("no allocation (AllocCreateOverSSHTakesProjectFlag failed)")
		}
		if got := over(t, "alloc", "list", "--json", "id", "--jq", ".[].id"); !strings.Contains(got, allocID) {
			t.Errorf("ssh gpuaas-dev alloc list: %q; want %s listed", got, allocID)
		}
		conf, err := os.ReadFile(sshConfig)
		if err != nil {
			t.Fatal(err)
		}
		port := regexp.MustCompile(`(?m)^\s*Port (\d+)$`).FindSubmatch(conf)
		if port == nil {
			t.Fatalf("no Port in the ssh config:\n%s", conf)
		}
		// Without a terminal, no command gets the help, and the command
		// lines it shows work with the generated config.
		out, _, code := gw.run()
		hint := "ssh -p " + string(port[1]) + " gpuaas@localhost"
		if code != 0 || !strings.Contains(out, hint+" <command>") || !strings.Contains(out, "alloc") {
			t.Errorf("ssh gpuaas-dev with no command and no terminal: exit %d %q; want the help naming %q", code, out, hint)
		}
		if out, code := openssh(t, "ssh", append([]string{"-F", sshConfig}, strings.Fields(hint)[1:]...)...); code != 0 {
			t.Errorf("%s: exit %d %q; want the help", hint, code, out)
		}
		testutil.EventuallyWithin(t, 2*time.Minute, allocID+" active", func() bool {
			return local(t, "alloc", "get", allocID, "--json", "state", "--jq", ".state") == "active"
		})

		// Plain `ssh gpuaas-dev` on a terminal: the dashboard.
		p := startPane(t, "ssh -F "+sshConfig+" gpuaas-dev")
		s := p.waitScreen("the dashboard over SSH with the allocation and the balance", func(s string) bool {
			return strings.Contains(s, allocID) && strings.Contains(s, "balance $")
		})
		if strings.Contains(s, "balance —") {
			t.Errorf("the dashboard over SSH shows no balance:\n%s", s)
		}
		p.keys("Enter")
		line := "ssh -p " + string(port[1]) + " " + allocID + "@localhost"
		p.waitFor(line)
		if strings.Contains(p.screen(), "<gateway>") {
			t.Errorf("the detail pane still shows <gateway>:\n%s", p.screen())
		}
		// The line shown is one that works (with the generated config).
		argv := append([]string{"-F", sshConfig}, strings.Fields(line)[1:]...)
		out, code = openssh(t, "ssh", append(argv, "echo reached-$((6*7))")...)
		if code != 0 || !strings.Contains(out, "reached-42") {
			t.Errorf("%s: exit %d %q; want the allocation's shell", line, code, out)
		}
		p.keys("q")
		p.waitScreen("the dashboard to exit", func(string) bool {
			st, err := os.ReadFile(p.status)
			return err == nil && strings.HasSuffix(string(st), "\n")
		})
		if st, _ := os.ReadFile(p.status); strings.TrimSpace(string(st)) != "0" {
			t.Errorf("ssh gpuaas-dev exited with %q; want 0", st)
		}
	})
}
