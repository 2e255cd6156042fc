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
	root := NewSSHRootCmd(cmdutil.New(ios))
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
	if NewSSHRootCmd(cmdutil.New(ios)) == root {
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
	local := Root(cmdutil.New(ios))
	ssh := NewSSHRootCmd(cmdutil.New(ios))
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
	walk(ssh, func(c *cobra.Command) { served[relPath(c)] = true })
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
