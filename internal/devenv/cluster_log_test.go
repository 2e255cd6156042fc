package devenv_test

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gpuaas/gpuaas/controld/controldtest"
	"github.com/gpuaas/gpuaas/internal/devenv"
	"github.com/gpuaas/gpuaas/internal/testutil"
)

// jsonLog is a slog JSON sink the test reads while the platform writes.
type jsonLog struct {
	// mu protects buf.
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *jsonLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

// lines are the records whose msg is msg.
func (l *jsonLog) lines(t *testing.T, msg string) []map[string]any {
	t.Helper()
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []map[string]any
	for _, line := range strings.Split(l.buf.String(), "\n") {
		if !strings.Contains(line, `"msg":"`+msg+`"`) {
			continue
		}
		var rec map[string]any
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			t.Fatalf("log line %q: %v", line, err)
		}
		out = append(out, rec)
	}
	return out
}

// TestDaemonsLogNATSDisconnectAndReconnect: each server of the cluster is
// stopped in turn (and started again before the next), so every daemon
// connection (controld's two per replica, the gateway's, hostd's) loses its
// server at least once: each logs one Warn "nats disconnected" naming the stopped
// server and the error, and one Info "nats reconnected" naming another
// server and the outage.
func TestDaemonsLogNATSDisconnectAndReconnect(t *testing.T) {
	var sink jsonLog
	log := slog.New(slog.NewJSONHandler(&sink, &slog.HandlerOptions{Level: slog.LevelInfo}))
	env, err := devenv.Start(context.Background(), devenv.Config{DataDir: t.TempDir(),
		DatabaseURL: testutil.Postgres(t, controldtest.Template), Hosts: 1, Cluster: true, Log: log})
	if err != nil {
		t.Fatalf("start: %v", err)
	}
	t.Cleanup(func() { _ = env.Close() })
	c := env.NATSCluster

	seen := map[string]int{} // disconnects per connection name
	for i := range c.Len() {
		names, err := c.ClientNames(i)
		if err != nil {
			t.Fatal(err)
		}
		names = slices.DeleteFunc(names, func(n string) bool { return !strings.HasPrefix(n, "gpuaas-") })
		before := len(sink.lines(t, "nats disconnected"))
		stoppedURL := c.ServerURL(i)
		c.Stop(i)
		testutil.Eventually(t, "every daemon connection on the stopped server to reconnect", func() bool {
			return len(sink.lines(t, "nats disconnected")) == before+len(names) &&
				len(sink.lines(t, "nats reconnected")) == before+len(names)
		})
		disc := sink.lines(t, "nats disconnected")[before:]
		reconn := sink.lines(t, "nats reconnected")[before:]
		var got []string
		for k, d := range disc {
			got = append(got, d["conn"].(string))
			seen[d["conn"].(string)]++
			if d["level"] != "WARN" || d["server"] != stoppedURL || d["err"] == nil {
				t.Errorf("server %d: disconnect line %v; want WARN naming %s with err", i, d, stoppedURL)
			}
			r := reconn[k]
			if r["level"] != "INFO" || r["server"] == stoppedURL || r["server"] == "" || r["outage"] == nil {
				t.Errorf("server %d: reconnect line %v; want INFO naming another server with the outage", i, r)
			}
		}
		slices.Sort(got)
		slices.Sort(names)
		if !slices.Equal(got, names) {
			t.Errorf("server %d: disconnect lines from %q; want one per connection it served, %q", i, got, names)
		}
		t.Logf("stopped %s: %d daemon connections logged their loss and return: %q", c.Name(i), len(names), names)
		if err := c.Restart(i); err != nil {
			t.Fatal(err)
		}
		if err := c.WaitJetStream(time.Minute); err != nil {
			t.Fatal(err)
		}
	}
	// Every connection lost its server at least once (one that moved to
	// a server stopped later lost it twice). controld's: 2 per replica.
	want := map[string]int{"gpuaas-controld": devenv.ControldReplicas, "gpuaas-controld-sys": devenv.ControldReplicas,
		"gpuaas-sshgate": 1, "gpuaas-hostd": 1}
	for name, n := range want {
		if seen[name] < n {
			t.Errorf("%s: %d disconnect lines; want at least %d (one per connection)", name, seen[name], n)
		}
	}
}
