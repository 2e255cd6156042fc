package e2e

import (
	"strings"
	"testing"
	"time"
)

// TestWatchAfterLogoutSaysSessionEnded: a running `gpuaas watch` whose
// session is logged out (from another command) ends saying the session
// ended and to log in again, exit 4 (unauthenticated) — not the client
// library's raw "nats: authorization violation" and a hint to wait for
// the server.
func TestWatchAfterLogoutSaysSessionEnded(t *testing.T) {
	dev, _ := loggedInDev(t)
	w := dev.startWatch(t)
	if r := dev.gpuaas(t, "", "logout"); r.code != 0 {
		t.Fatalf("logout: exit %d %s", r.code, r.stderr)
	}
	select {
	case <-w.done:
	case <-time.After(time.Minute):
		t.Fatalf("the watch still runs a minute after logout; stderr:\n%s", w.stderr.String())
	}
	stderr := w.stderr.String()
	t.Logf("watch after logout: exit %d, stderr:\n%s", w.cmd.ProcessState.ExitCode(), stderr)
	if code := w.cmd.ProcessState.ExitCode(); code != 4 {
		t.Errorf("watch exited %d; want 4 (unauthenticated)", code)
	}
	if !strings.Contains(stderr, "your session ended") || !strings.Contains(stderr, "gpuaas login") {
		t.Errorf("stderr %q; want it to say the session ended and to run `gpuaas login`", stderr)
	}
	if strings.Contains(stderr, "authorization violation") {
		t.Errorf("stderr %q; want no raw NATS error", stderr)
	}
}
