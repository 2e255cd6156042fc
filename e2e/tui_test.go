package e2e

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/gpuaas/gpuaas/internal/testutil"
)

// tmuxPane is `gpuaas tui` running in a detached tmux session on a
// private tmux server, driven with send-keys and read with capture-pane.
type tmuxPane struct {
	t    *testing.T
	sock string
	// status is the file the TUI's exit status is written to: tmux does
	// not always learn it (a pane can be dead before it reaps the
	// process), a shell that waits for it does.
	status string
}

// startTUI runs `gpuaas tui` against dev in a 120×40 tmux window.
func startTUI(t *testing.T, dev *devProc) *tmuxPane {
	t.Helper()
	return startPane(t, "GPUAAS_CONFIG_DIR="+dev.configDir+" "+binary+" tui")
}

// startPane runs the shell command line in a 120×40 tmux window, on a
// terminal as a user would.
func startPane(t *testing.T, commandLine string) *tmuxPane {
	t.Helper()
	if _, err := exec.LookPath("tmux"); err != nil {
		t.Skip("tmux is not installed (apt-get install tmux): the TUI end-to-end test drives the dashboard through it")
	}
	dir := t.TempDir()
	p := &tmuxPane{t: t, sock: filepath.Join(dir, "tmux.sock"), status: filepath.Join(dir, "status")}
	command := commandLine + "; echo $? > " + p.status
	// remain-on-exit keeps the pane after q.
	p.tmux("new-session", "-d", "-s", "tui", "-x", "120", "-y", "40", command, ";",
		"set-option", "-t", "tui", "remain-on-exit", "on")
	t.Cleanup(func() { _ = exec.Command("tmux", "-S", p.sock, "kill-server").Run() })
	return p
}

func (p *tmuxPane) tmux(args ...string) string {
	p.t.Helper()
	out, err := exec.Command("tmux", append([]string{"-S", p.sock}, args...)...).CombinedOutput()
	if err != nil {
		p.t.Fatalf("tmux %v: %v\n%s", args, err, out)
	}
	return string(out)
}

// screen is what the pane shows now.
func (p *tmuxPane) screen() string { return p.tmux("capture-pane", "-p", "-t", "tui") }

// keys sends keys one tmux argument at a time ("Enter", "c").
func (p *tmuxPane) keys(keys ...string) {
	p.t.Helper()
	for _, k := range keys {
		p.tmux("send-keys", "-t", "tui", k)
	}
}

// typeText types s literally.
func (p *tmuxPane) typeText(s string) { p.tmux("send-keys", "-t", "tui", "-l", s) }

// waitScreen polls the pane until cond holds, failing after 60 seconds
// with the last screen.
func (p *tmuxPane) waitScreen(what string, cond func(screen string) bool) string {
	p.t.Helper()
	var s string
	defer func() {
		if p.t.Failed() {
			p.t.Logf("the screen:\n%s", s)
		}
	}()
	testutil.EventuallyWithin(p.t, 60*time.Second, what, func() bool {
		s = p.screen()
		return cond(s)
	})
	return s
}

func (p *tmuxPane) waitFor(text string) string {
	p.t.Helper()
	return p.waitScreen("the screen to show "+text, func(s string) bool { return strings.Contains(s, text) })
}

// rowOf is the table line of allocation id.
func rowOf(screen, id string) string {
	for _, l := range strings.Split(screen, "\n") {
		if strings.Contains(l, id) && !strings.Contains(l, "created") && !strings.Contains(l, "Release") {
			return l
		}
	}
	return ""
}

// TestTUICreateAndRelease is acceptance 4's end-to-end run: in a real
// terminal (tmux) against `gpuaas dev`, create an allocation from the
// wizard, see it go active, decline and then confirm its release, see it
// released, and quit with status 0.
func TestTUICreateAndRelease(t *testing.T) {
	dev, _ := loggedInDev(t)
	p := startTUI(t, dev)

	p.waitScreen("the empty dashboard with live events", func(s string) bool {
		return strings.Contains(s, "No allocations") && strings.Contains(s, "balance") && strings.Contains(s, "live")
	})
	p.keys("c")
	p.waitFor("1 SKU")
	p.typeText("h200-slice")
	p.waitFor("SKU: h200-slice")
	p.keys("Enter")
	p.waitFor("GPUs for h200-slice")
	p.keys("2", "Enter")
	p.waitFor("Project:")
	p.keys("Enter")
	s := p.waitFor("Create h200-slice × 2 GPU in project dev")
	if !strings.Contains(s, "$7.00/h") {
		t.Fatalf("the confirm page does not show the price (2 × $3.50):\n%s", s)
	}
	p.waitScreen("a dry-run verdict (or that there is none)", func(s string) bool {
		return strings.Contains(s, "verdict") && !strings.Contains(s, "checking")
	})
	p.keys("Enter")

	s = p.waitFor("created a-")
	id := regexp.MustCompile(`created (a-[a-z0-9]+)`).FindStringSubmatch(s)[1]
	s = p.waitScreen(id+" active", func(s string) bool { return strings.Contains(rowOf(s, id), "active") })
	if row := rowOf(s, id); !strings.HasPrefix(row, "› ") || !strings.Contains(row, "h200-slice") {
		t.Fatalf("the new allocation's row %q; want it selected, an h200-slice", row)
	}
	if r := dev.gpuaas(t, "", "alloc", "get", id, "--json", "state,gpus", "--jq", `.state + " " + (.gpus|tostring)`); strings.TrimSpace(r.stdout) != "active 2" {
		t.Fatalf("alloc get %s: %q %s; want active with 2 GPUs", id, r.stdout, r.stderr)
	}

	// Declining the question keeps it.
	p.keys("x")
	p.waitFor("Release " + id + "?")
	p.keys("n")
	p.waitFor("release cancelled")
	if r := dev.gpuaas(t, "", "alloc", "get", id, "--json", "state", "--jq", ".state"); strings.TrimSpace(r.stdout) != "active" {
		t.Fatalf("after declining, %s is %q; want still active", id, r.stdout)
	}

	p.keys("x")
	p.waitFor("Release " + id + "?")
	p.keys("y")
	p.waitScreen(id+" released", func(s string) bool { return strings.Contains(rowOf(s, id), "released") })
	if r := dev.gpuaas(t, "", "alloc", "get", id, "--json", "state", "--jq", ".state"); strings.TrimSpace(r.stdout) != "released" {
		t.Fatalf("alloc get %s after the release: %q %s", id, r.stdout, r.stderr)
	}

	p.keys("q")
	p.waitScreen("the dashboard to exit", func(string) bool {
		st, err := os.ReadFile(p.status)
		return err == nil && strings.HasSuffix(string(st), "\n")
	})
	if st, err := os.ReadFile(p.status); err != nil || strings.TrimSpace(string(st)) != "0" {
		t.Fatalf("gpuaas tui exited with status %q (%v); want 0; the screen:\n%s", st, err, p.screen())
	}
}
