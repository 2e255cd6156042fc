package bus

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
)

// logLines is a slog JSON sink a test can read while connections write.
type logLines struct {
	// mu protects buf.
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *logLines) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

// records are the lines logged so far whose msg is one of msgs (all
// lines without msgs).
func (l *logLines) records(t *testing.T, msgs ...string) []map[string]any {
	t.Helper()
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []map[string]any
	for _, line := range strings.Split(strings.TrimSpace(l.buf.String()), "\n") {
		if line == "" {
			continue
		}
		var rec map[string]any
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			t.Fatalf("log line %q: %v", line, err)
		}
		if len(msgs) == 0 || contains(msgs, rec["msg"].(string)) {
			out = append(out, rec)
		}
	}
	return out
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// eventually polls cond until it holds or a generous deadline passes.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func restartOnSamePort(t *testing.T, cfg Config, clientURL string) *Server {
	t.Helper()
	u, err := url.Parse(clientURL)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Port, err = strconv.Atoi(u.Port()); err != nil {
		t.Fatal(err)
	}
	srv, err := Start(cfg)
	if err != nil {
		t.Fatalf("restart nats: %v", err)
	}
	return srv
}

// TestLogConnectionAcrossNATSRestart: a real server restart gives exactly
// one Warn "nats disconnected" (server, error), one Info "nats
// reconnected" (server, outage), and a close the process asks for one
// Info "nats connection closed". The handler set before LogConnection
// still runs.
func TestLogConnectionAcrossNATSRestart(t *testing.T) {
	cfg := Config{StoreDir: t.TempDir()}
	srv, err := Start(cfg)
	if err != nil {
		t.Fatal(err)
	}
	serverURL := srv.ClientURL()
	var sink logLines
	log := slog.New(slog.NewJSONHandler(&sink, nil))
	ownReconnects := make(chan struct{}, 1)
	nc, err := Connect(serverURL, "logged", nats.ReconnectHandler(func(*nats.Conn) { ownReconnects <- struct{}{} }),
		LogConnection(log))
	if err != nil {
		t.Fatal(err)
	}

	srv.Shutdown()
	eventually(t, "the disconnect line", func() bool { return len(sink.records(t, "nats disconnected")) > 0 })
	// Reconnect attempts fail while it is down: still one line.
	time.Sleep(600 * time.Millisecond) // let several attempts fail (not a timing assertion)
	srv = restartOnSamePort(t, cfg, serverURL)
	defer srv.Shutdown()
	<-ownReconnects
	eventually(t, "the reconnect line", func() bool { return len(sink.records(t, "nats reconnected")) > 0 })
	nc.Close()
	eventually(t, "the close line", func() bool { return len(sink.records(t, "nats connection closed")) > 0 })

	recs := sink.records(t)
	var msgs []string
	for _, r := range recs {
		msgs = append(msgs, r["level"].(string)+" "+r["msg"].(string))
	}
	want := []string{"WARN nats disconnected", "INFO nats reconnected", "INFO nats connection closed"}
	if strings.Join(msgs, "|") != strings.Join(want, "|") {
		t.Fatalf("got lines %q; want %q", msgs, want)
	}
	host := strings.TrimPrefix(serverURL, "nats://")
	for i, r := range recs {
		if r["conn"] != "logged" {
			t.Errorf("line %d conn = %v; want logged", i, r["conn"])
		}
		if s, _ := r["server"].(string); !strings.Contains(s, host) {
			t.Errorf("line %d server = %q; want %s", i, s, host)
		}
	}
	if e, _ := recs[0]["err"].(string); e == "" {
		t.Errorf("disconnect line has no err: %v", recs[0])
	}
	// JSON carries a duration in nanoseconds.
	if outage, _ := recs[1]["outage"].(float64); time.Duration(outage) < 600*time.Millisecond {
		t.Errorf("reconnect outage = %v; want at least the 600ms the server was down", recs[1]["outage"])
	}
	t.Logf("lines: %v", recs)
}

// TestLogConnectionLost: a connection that gives up reconnecting says so
// at Error with the error and how long it was out.
func TestLogConnectionLost(t *testing.T) {
	srv, err := Start(Config{StoreDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	var sink logLines
	log := slog.New(slog.NewJSONHandler(&sink, nil))
	nc, err := Connect(srv.ClientURL(), "given-up", nats.MaxReconnects(2), LogConnection(log))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	srv.Shutdown()
	eventually(t, "the lost line", func() bool { return len(sink.records(t, "nats connection lost")) > 0 })
	lost := sink.records(t, "nats connection lost")[0]
	if lost["level"] != "ERROR" || lost["err"] == nil || lost["outage"] == nil {
		t.Fatalf("got %v; want an ERROR line with err and outage", lost)
	}
	if n := len(sink.records(t, "nats disconnected")); n != 1 {
		t.Fatalf("got %d disconnect lines; want 1", n)
	}
}
