package e2e

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gpuaas/gpuaas/internal/api"
)

// TestFaultRouteCutEventsReachWatch is the fault "live events lost in a
// cluster": three nats-server processes, controld connected to the first,
// a user's `gpuaas watch --json` connected to the second. The second
// server is paused (SIGSTOP) until the first has closed its route to it as
// stale; the user's events published meanwhile are fanned out (and acked)
// through the first server, which has no route to deliver them on, while
// the watch's own connection stays up: it never reconnects, so only the
// event chain can tell it something is missing. Once the server runs again
// every event reaches the watch, once, in stream order, and the watch says
// (GPUAAS_DEBUG) that it read missed events back.
// Figures: events lost live, time from the resume to the last event.
func TestFaultRouteCutEventsReachWatch(t *testing.T) {
	const lost = 20
	// Routes (and clients) are pinged every second and closed after two
	// unanswered pings, so that the cut is seen in seconds.
	c := startFaultClusterConf(t, 1, 3, "ping_interval: \"1s\"\nping_max: 2\n")
	// controld again, connected to the first server only.
	c.procs[len(c.nats)].kill(t)
	all := c.natsURL
	c.natsURL = c.nats[0].url
	c.startControld("controld-first", freePorts(t, 1)[0])
	c.natsURL = all

	t.Setenv("GPUAAS_SERVER", c.nats[0].url)
	admin := c.client()
	victim := c.procs[1] // nats-server-2
	watch := startCutWatch(t, c.nats[1].url)

	// The watch follows events once it has subscribed: probe until it
	// prints one, then until it printed every probe made since.
	var probes []string
	var probed time.Time
	c.waitFor("the watch to follow events", func() bool {
		if time.Since(probed) > time.Second {
			probes, probed = append(probes, createProject(t, admin, fmt.Sprintf("probe-%d", len(probes)))), time.Now()
		}
		return len(watch.projects(t, probes)) > 0
	})
	first := watch.projects(t, probes)[0].Subject
	probes = probes[slices.Index(probes, first):]
	c.waitFor("the watch to print every probe", func() bool { return len(watch.projects(t, probes)) == len(probes) })
	ids := []string{probes[len(probes)-1]}
	if r := watch.stderr.String(); strings.Contains(r, "read back") {
		t.Fatalf("the watch read events back before the cut:\n%s", r)
	}

	if err := syscall.Kill(-victim.cmd.Process.Pid, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	paused := true
	resume := func() {
		if paused {
			_ = syscall.Kill(-victim.cmd.Process.Pid, syscall.SIGCONT)
			paused = false
		}
	}
	t.Cleanup(resume)
	c.waitFor("nats-1 to drop its route to nats-2", func() bool { return !routedTo(c.nats[0].health, "nats-2") })
	for i := 1; i <= lost; i++ {
		ids = append(ids, createProject(t, admin, fmt.Sprintf("cut-%d", i)))
	}
	// Every event fanned out (the heads bucket has the last one) while the
	// route is still down.
	c.waitFor("the fan-out to send every event", func() bool {
		held, err := userEvents(t.Context(), admin, 0)
		if err != nil || len(held) == 0 {
			return false
		}
		h, err := admin.EventsSince(t.Context(), api.EventsSinceRequest{After: 0, Head: true})
		return err == nil && h.Head >= held[len(held)-1]
	})
	if routedTo(c.nats[0].health, "nats-2") {
		t.Fatal("nats-1 routed to nats-2 again before the events were sent: no cut to test")
	}
	liveBefore := len(watch.projects(t, ids))
	resume()
	resumed := time.Now()

	c.waitFor("the watch to print every event", func() bool { return len(watch.projects(t, ids)) >= len(ids) })
	took := time.Since(resumed)
	// Each once, in stream order. (Not necessarily in the order the
	// projects were created: the relay keeps one subject's events in
	// order, and the cut made it retry some.)
	got := watch.projects(t, ids)
	var seqs []uint64
	printed := map[string]int{}
	for i, ev := range got {
		seqs = append(seqs, ev.Seq)
		printed[ev.Subject]++
		if i > 0 && ev.Seq <= got[i-1].Seq {
			t.Errorf("event %d has seq %d after %d; want stream order", i, ev.Seq, got[i-1].Seq)
		}
	}
	for _, id := range ids {
		if printed[id] != 1 {
			t.Errorf("the event of project %s was printed %d times; want once", id, printed[id])
		}
	}
	stderr := watch.stderr.String()
	t.Logf("%d events published while nats-2 was cut off; the watch had %d of them before the resume and all %d (seqs %v) %v after it; reconnects: none expected; stderr:\n%s",
		lost, liveBefore-1, len(ids), seqs, took.Round(time.Millisecond), stderr)
	// Read back because of the chain or the head check: the watch's own
	// connection never dropped, so a reconnect did not tell it.
	if !strings.Contains(stderr, "did not arrive live (head)") && !strings.Contains(stderr, "did not arrive live (chain)") {
		t.Errorf("the watch did not say it read missed events back after a head check or a broken chain; stderr:\n%s", stderr)
	}
	if watch.exited() {
		t.Errorf("the watch exited: %s", stderr)
	}
}

// cutWatch is a running `gpuaas watch --json`.
type cutWatch struct {
	cmd            *exec.Cmd
	stdout, stderr *syncBuffer
	done           chan struct{}
}

// startCutWatch starts `gpuaas watch --json` on server, with GPUAAS_DEBUG,
// interrupted at the test's end.
func startCutWatch(t *testing.T, server string) *cutWatch {
	t.Helper()
	w := &cutWatch{stdout: &syncBuffer{}, stderr: &syncBuffer{}, done: make(chan struct{})}
	w.cmd = exec.Command(binary, "watch", "--json")
	w.cmd.Env = append(os.Environ(), "NO_COLOR=1", "GPUAAS_DEBUG=1", "GPUAAS_SERVER="+server)
	w.cmd.Stdout, w.cmd.Stderr = w.stdout, w.stderr
	w.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := w.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { _ = w.cmd.Wait(); close(w.done) }()
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("--- gpuaas watch --json on %s:\nstdout:\n%s\nstderr:\n%s", server, w.stdout.String(), w.stderr.String())
		}
		_ = w.cmd.Process.Signal(syscall.SIGINT)
		select {
		case <-w.done:
		case <-time.After(10 * time.Second):
			_ = w.cmd.Process.Kill()
			<-w.done
		}
	})
	return w
}

func (w *cutWatch) exited() bool {
	select {
	case <-w.done:
		return true
	default:
		return false
	}
}

// projects returns the events printed so far about the projects ids.
func (w *cutWatch) projects(t *testing.T, ids []string) []api.Event {
	t.Helper()
	var out []api.Event
	for _, line := range strings.Split(w.stdout.String(), "\n") {
		var ev api.Event
		if line == "" || json.Unmarshal([]byte(line), &ev) != nil {
			continue
		}
		for _, id := range ids {
			if ev.Kind == api.EventProject && ev.Subject == id {
				out = append(out, ev)
			}
		}
	}
	return out
}

// createProject creates a project and returns its id.
func createProject(t *testing.T, cl *api.Client, name string) string {
	t.Helper()
	p, err := cl.ProjectCreate(t.Context(), api.ProjectCreateRequest{Name: name})
	if err != nil {
		t.Fatalf("create project %s: %v", name, err)
	}
	return p.ID
}

// routedTo reports whether the server whose /healthz is health has a
// route to the server called name (its /routez).
func routedTo(health, name string) bool {
	resp, err := http.Get(strings.TrimSuffix(health, "/healthz") + "/routez")
	if err != nil {
		return true // cannot tell: not cut
	}
	defer resp.Body.Close()
	var rz struct {
		Routes []struct {
			RemoteName string `json:"remote_name"`
		} `json:"routes"`
	}
	if json.NewDecoder(resp.Body).Decode(&rz) != nil {
		return true
	}
	for _, r := range rz.Routes {
		if r.RemoteName == name {
			return true
		}
	}
	return false
}
