package sshgate

import (
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/gpuaas/gpuaas/internal/testutil"
)

// maxIdleSessionGoroutines is how many goroutines an idle PTY shell
// session holds, gateway, link and node together (decision 0054): six of
// x/crypto/ssh and charmbracelet/ssh for the client's connection, the
// link's reader on each side, two in the gateway (the session's own,
// which copies stdout, and its events) and four on the node (the link, the
// session's requests, the PTY's output, the program's exit). The client's
// stdin adds one each side while it is open; the benchmark's clients send
// EOF at once, as here.
const maxIdleSessionGoroutines = 14

// TestIdleSessionGoroutinesBounded holds idle PTY shells open through the
// gateway to a bare-metal allocation (gateway and terminal server in this
// process, the clients in a child, as BenchmarkIdleSessions) and checks
// what each holds once they settle: at most maxIdleSessionGoroutines
// goroutines (half a goroutine per session of slack for the stack's own
// background work), and no OS thread blocked waiting for a session's
// program (waitid(2)): each would be an OS thread and its stacks per
// session. Then everything goes back to where it was.
func TestIdleSessionGoroutinesBounded(t *testing.T) {
	const n = 20
	s := startRealStack(t, slog.New(slog.DiscardHandler))
	spec := newIdleSpec(t, s)
	spec.N = 1
	warm := startIdleClients(t, spec)
	warm.closeAll(t)
	g0 := settledGoroutines(t)

	spec.N = n
	c := startIdleClients(t, spec)
	testutil.Eventually(t, "every session counted by the gateway", func() bool { return trackerCount(&s.gw.bg) >= n })
	g := settledGoroutines(t)
	if max := maxIdleSessionGoroutines*n + n/2; g-g0 > max {
		t.Errorf("%d idle sessions hold %d goroutines (%.2f each); want at most %d each. Stacks:\n%s",
			n, g-g0, float64(g-g0)/n, maxIdleSessionGoroutines, goroutineSummary())
	}
	if w := threadsInSyscall(t, unix.SYS_WAITID); w >= n/2 {
		t.Errorf("%d OS threads blocked in waitid with %d idle sessions; want none per session", w, n)
	}

	c.closeAll(t)
	testutil.Eventually(t, "goroutines back to the baseline", func() bool { return runtime.NumGoroutine() <= g0 })
	testutil.Eventually(t, "the shells gone", func() bool { k, _ := children(t); return k == 0 })
}

// threadsInSyscall counts this process's threads blocked in system call
// nr (/proc/self/task/*/syscall: its number first, or "running").
func threadsInSyscall(t testing.TB, nr int) int {
	t.Helper()
	tasks, err := filepath.Glob("/proc/self/task/*/syscall")
	if err != nil {
		t.Fatal(err)
	}
	want := strconv.Itoa(nr)
	k := 0
	for _, p := range tasks {
		data, err := os.ReadFile(p)
		if err != nil {
			continue // the thread is gone
		}
		if f := strings.Fields(string(data)); len(f) > 0 && f[0] == want {
			k++
		}
	}
	return k
}
