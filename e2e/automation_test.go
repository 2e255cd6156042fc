package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/testutil"
)

// TestWatchAndWaitExitCodes is acceptance 3 of the terminal issue: `gpuaas
// watch --json` emits one event per state change of allocations created
// in the test, in order, and `gpuaas alloc wait` exits 0 when the state is
// reached, 20 when the allocation failed and 21 on timeout. One simulated
// slice host works; a simulated bare-metal host fails every user_create.
func TestWatchAndWaitExitCodes(t *testing.T) {
	data, cfg := tempDir(t, "gpuaas-e2e-data-"), tempDir(t, "gpuaas-e2e-cfg-")
	pwFile := writeFile(t, cfg, "pw", devPassword+"\n")
	dev := startDev(t, data, cfg, "--password-file", pwFile, "--hosts", "1")
	if r := dev.gpuaas(t, devPassword, "login", "--password-stdin"); r.code != 0 {
		t.Fatalf("login: exit %d %s", r.code, r.stderr)
	}
	r := dev.gpuaas(t, "", "node", "enroll", "--name", "broken", "--shape", "baremetal")
	token := strings.TrimSpace(r.stdout)
	if r.code != 0 || !strings.HasPrefix(token, "gpe_") {
		t.Fatalf("node enroll: exit %d %q %s", r.code, r.stdout, r.stderr)
	}
	startHostd(t, devServer(t, dev), tempDir(t, "gpuaas-e2e-hostd-"), "--token", token,
		"--sim", "h100-baremetal", "--fail-phase", "user_create")
	testutil.EventuallyWithin(t, time.Minute, "node broken ready", func() bool {
		r := dev.gpuaas(t, "", "node", "get", "broken", "--json", "node", "--jq", ".node.state + \" \" + (.node.slots_free|tostring)")
		return strings.TrimSpace(r.stdout) == "ready 8"
	})

	w := dev.startWatch(t)

	// Active: exit 0, with the phases on stderr as plain lines.
	good := dev.createID(t, "--sku", "h200-slice", "--gpus", "1")
	r = dev.gpuaas(t, "", "alloc", "wait", good, "--for", "active", "--timeout", "2m")
	if r.code != 0 || !strings.HasPrefix(r.stdout, good+"\tactive\t") {
		t.Fatalf("wait for active: exit %d %q\n%s", r.code, r.stdout, r.stderr)
	}
	// The provisioning phases, if it was still going when the wait began
	// (each once), and the final state last.
	if lines := strings.Split(strings.TrimSuffix(r.stderr, "\n"), "\n"); lines[len(lines)-1] != good+" is active" ||
		slices.Contains(lines[:len(lines)-1], good+" is active") {
		t.Errorf("wait's stderr does not end with %q, once:\n%s", good+" is active", r.stderr)
	}
	// Timeout: an active allocation is not released within a second.
	r = dev.gpuaas(t, "", "alloc", "wait", good, "--for", "released", "--timeout", "1s")
	if want := "error: allocation " + good + " is still active after 1s (waiting for released)"; r.code != 21 || !strings.Contains(r.stderr, want) {
		t.Errorf("wait for released: exit %d\n%s\nwant exit 21 and %q", r.code, r.stderr, want)
	}
	if r := dev.gpuaas(t, "", "alloc", "release", good, "--yes"); r.code != 0 {
		t.Fatalf("release: exit %d %s", r.code, r.stderr)
	}
	if r := dev.gpuaas(t, "", "alloc", "wait", good, "--for", "released", "--timeout", "2m"); r.code != 0 {
		t.Fatalf("wait for released: exit %d %s", r.code, r.stderr)
	}

	// Failed: exit 20 with the reason.
	bad := dev.createID(t, "--sku", "h100-baremetal")
	r = dev.gpuaas(t, "", "alloc", "wait", bad, "--timeout", "2m")
	if r.code != 20 || !strings.Contains(r.stderr, "error: allocation "+bad+" failed: ") || !strings.Contains(r.stderr, "user_create") {
		t.Errorf("wait on a failing allocation: exit %d\n%s\nwant exit 20 naming user_create", r.code, r.stderr)
	}
	if r.stdout != "" {
		t.Errorf("failed wait printed %q on stdout; want nothing", r.stdout)
	}

	testutil.EventuallyWithin(t, time.Minute, "the watch to see both ends", func() bool {
		out := w.stdout.String()
		return strings.Contains(out, `"to":"released"`) && strings.Contains(out, `"to":"failed"`)
	})
	changes := w.stop(t)
	want := map[string]string{
		good: "requested>provisioning provisioning>active active>releasing releasing>released",
		bad:  "requested>provisioning provisioning>failed",
	}
	for id, w := range want {
		if got := strings.Join(changes[id], " "); got != w {
			t.Errorf("watch saw %s go %q; want %q, once each, in order", id, got, w)
		}
	}
}

// watchProc is a running `gpuaas watch --json`.
type watchProc struct {
	cmd    *exec.Cmd
	stdout *syncBuffer
	stderr *syncBuffer
	done   chan error
}

// startWatch runs `gpuaas watch --json` and returns once its stream is
// live: it creates projects until the watch reports one.
func (p *devProc) startWatch(t *testing.T) *watchProc {
	t.Helper()
	cmd := exec.Command(binary, "watch", "--json")
	cmd.Env = append(os.Environ(), "GPUAAS_CONFIG_DIR="+p.configDir)
	w := &watchProc{cmd: cmd, stdout: &syncBuffer{}, stderr: &syncBuffer{}, done: make(chan error, 1)}
	cmd.Stdout, cmd.Stderr = w.stdout, w.stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { w.done <- cmd.Wait() }()
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			_ = cmd.Process.Kill()
			<-w.done
		}
	})
	for i := 0; !strings.Contains(w.stdout.String(), `"kind":"project.changed"`); i++ {
		if i == 100 {
			t.Fatalf("the watch never reported a project created for it:\n%s", w.stderr.String())
		}
		if r := p.gpuaas(t, "", "project", "create", fmt.Sprintf("watch-sync-%d", i)); r.code != 0 {
			t.Fatalf("project create: exit %d %s", r.code, r.stderr)
		}
		time.Sleep(100 * time.Millisecond)
	}
	return w
}

// stop interrupts the watch, checks that it exits 130 having written only
// whole JSON lines, and returns each allocation's state changes in the
// order they were printed.
func (w *watchProc) stop(t *testing.T) map[string][]string {
	t.Helper()
	if err := w.cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	select {
	case <-w.done:
	case <-time.After(30 * time.Second):
		t.Fatal("watch did not stop on SIGINT")
	}
	if code := w.cmd.ProcessState.ExitCode(); code != 130 {
		t.Errorf("watch exited %d on SIGINT; want 130\n%s", code, w.stderr.String())
	}
	changes := map[string][]string{}
	for _, line := range strings.Split(strings.TrimSuffix(w.stdout.String(), "\n"), "\n") {
		var ev api.Event
		if err := json.Unmarshal([]byte(line), &ev); err != nil {
			t.Fatalf("watch line %q is not a JSON event: %v", line, err)
		}
		if ev.Kind != api.EventAllocState {
			continue
		}
		var c api.AllocStateChange
		if err := json.Unmarshal(ev.Data, &c); err != nil {
			t.Fatalf("alloc.state data %s: %v", ev.Data, err)
		}
		changes[ev.Subject] = append(changes[ev.Subject], c.From+">"+c.To)
	}
	return changes
}

// createID creates an allocation and returns its id.
func (p *devProc) createID(t *testing.T, args ...string) string {
	t.Helper()
	r := p.gpuaas(t, "", append([]string{"alloc", "create", "--json", "id", "--jq", ".id"}, args...)...)
	id := strings.TrimSpace(r.stdout)
	if r.code != 0 || id == "" {
		t.Fatalf("alloc create %v: exit %d %q %s", args, r.code, r.stdout, r.stderr)
	}
	return id
}
