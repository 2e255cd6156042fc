package cli

import (
	"slices"
	"strings"
	"testing"

	"github.com/spf13/cobra"

	"github.com/gpuaas/gpuaas/cli/cmdutil"
)

// TestSSHCommandTree: the tree served over SSH holds the API commands and
// nothing that acts on the gateway's machine.
func TestSSHCommandTree(t *testing.T) {
	ios, _, _, _ := cmdutil.Test()
	root := NewSSHRootCmd(NewFactory(ios))
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
		// Local-only commands are hidden stubs that say why (TestLocalOnlyOverSSHSaysWhy).
		if c, _, err := root.Find([]string{never}); err == nil && c != root {
			if _, stub := c.Annotations[cmdutil.AnnotationLocalOnly]; !stub || !c.Hidden {
				t.Errorf("%s is served over SSH; want it absent or a hidden local-only stub", never)
			}
		}
	}
	// Fresh per call: flag state does not leak between sessions.
	if NewSSHRootCmd(NewFactory(ios)) == root {
		t.Fatal("got the same tree twice; want a fresh one")
	}
}

// TestEveryCommandServedOverSSHOrLocalOnly: every command of the whole
// tree, daemons included, is either served over SSH or marked
// cmdutil.LocalOnly (itself or a command above it), and no marked command
// is served. A new command therefore appears over SSH unless its author
// says why not.
func TestEveryCommandServedOverSSHOrLocalOnly(t *testing.T) {
	ios, _, _, _ := cmdutil.Test()
	local := Root(NewFactory(ios))
	ssh := NewSSHRootCmd(NewFactory(ios))
	// What Execute adds to each tree: help, and completion unless turned
	// off (the SSH tree turns it off; it writes scripts for this machine's
	// shell).
	for _, root := range []*cobra.Command{local, ssh} {
		root.InitDefaultHelpCmd()
		root.InitDefaultCompletionCmd()
	}
	if !ssh.CompletionOptions.DisableDefaultCmd {
		t.Error("the SSH tree offers cobra's completion command; want it off")
	}
	served := map[string]bool{}
	walk(ssh, func(c *cobra.Command) {
		if _, stub := c.Annotations[cmdutil.AnnotationLocalOnly]; !stub {
			served[relPath(c)] = true
		}
	})
	n := 0
	walk(local, func(c *cobra.Command) {
		n++
		path := relPath(c)
		reason, localOnly := cmdutil.IsLocalOnly(c)
		if path == "completion" || strings.HasPrefix(path, "completion ") {
			localOnly, reason = true, "cobra's, off over SSH"
		}
		switch {
		case localOnly && served[path]:
			t.Errorf("%q is local-only (%s) but served over SSH", path, reason)
		case !localOnly && !served[path]:
			t.Errorf("%q is neither served over SSH nor marked cmdutil.LocalOnly", path)
		case localOnly && reason == "":
			t.Errorf("%q is local-only without a reason", path)
		}
	})
	if n < 50 || len(served) < 20 {
		t.Fatalf("walked %d local and %d SSH commands; want the whole trees", n, len(served))
	}
	for path := range served {
		if c, _, err := local.Find(strings.Fields(path)); err != nil || relPath(c) != path {
			t.Errorf("%q is served over SSH but is not a local command", path)
		}
	}
}

// walk calls f for every command under root, not root itself.
func walk(root *cobra.Command, f func(*cobra.Command)) {
	for _, c := range root.Commands() {
		f(c)
		walk(c, f)
	}
}

// relPath is c's path below the root: "alloc create".
func relPath(c *cobra.Command) string {
	_, rest, _ := strings.Cut(c.CommandPath(), " ")
	return rest
}

// TestLocalOnlyOverSSHSaysWhy is the regression test of "over SSH `watch`,
// `node list` fail with `unknown command`": a local-only command over SSH
// exits 2 saying it is not served there, why, and where to run it; the
// SSH tree's help lists them; a command that does not exist is still
// unknown.
func TestLocalOnlyOverSSHSaysWhy(t *testing.T) {
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"watch", "--alloc", "a-1"}, "`gpuaas watch` is not served over SSH (receives events on a NATS connection"},
		{[]string{"node", "list"}, "`gpuaas node list` is not served over SSH (operator commands"},
		{[]string{"login"}, "`gpuaas login` is not served over SSH (keeps the session in this machine's config)"},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			ios, _, _, _ := cmdutil.Test()
			root := NewSSHRootCmd(NewFactory(ios))
			root.SetArgs(tt.args)
			_, err := root.ExecuteC()
			if err == nil || cmdutil.ExitCodeOf(err) != cmdutil.ExitUsage || !strings.Contains(err.Error(), tt.want) ||
				!strings.Contains(err.Error(), "run it with the gpuaas CLI on your machine") {
				t.Fatalf("got %v (exit %d); want exit 2 and %q", err, cmdutil.ExitCodeOf(err), tt.want)
			}
		})
	}
	ios, _, out, _ := cmdutil.Test()
	root := NewSSHRootCmd(NewFactory(ios))
	root.SetArgs([]string{"--help"})
	if err := root.Execute(); err != nil {
		t.Fatal(err)
	}
	if got := out.String(); !strings.Contains(got, "Not served here") || !strings.Contains(got, "watch") || !strings.Contains(got, "node") {
		t.Errorf("help over SSH:\n%s\nwant the local-only commands named", got)
	}
	root = NewSSHRootCmd(NewFactory(ios))
	root.SetArgs([]string{"wacth"})
	if _, err := root.ExecuteC(); err == nil || !strings.Contains(err.Error(), "unknown command") {
		t.Errorf("an unknown command: %v; want unknown command", err)
	}
}
