package agent_test

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	gossh "golang.org/x/crypto/ssh"

	"github.com/gpuaas/gpuaas/controld"
	"github.com/gpuaas/gpuaas/hostd/agent"
	"github.com/gpuaas/gpuaas/hostd/tasks"
	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/bus"
	"github.com/gpuaas/gpuaas/internal/hostproto"
	"github.com/gpuaas/gpuaas/internal/signing"
	"github.com/gpuaas/gpuaas/internal/testutil"
)

// fakeTerminal records what the agent tells the terminal server.
type fakeTerminal struct {
	// mu protects the following.
	mu      sync.Mutex
	node    string
	shape   string
	trusted []string // authorized_keys lines
}

func (f *fakeTerminal) SetNode(id, shape string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.node, f.shape = id, shape
}

func (f *fakeTerminal) SetTrusted(keys []gossh.PublicKey) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.trusted = nil
	for _, k := range keys {
		f.trusted = append(f.trusted, strings.TrimSpace(string(gossh.MarshalAuthorizedKey(k))))
	}
}

func (f *fakeTerminal) get() (node, shape string, trusted []string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.node, f.shape, slices.Clone(f.trusted)
}

func caLine(t *testing.T) string {
	t.Helper()
	pub, _, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	k, err := gossh.NewPublicKey(pub)
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(gossh.MarshalAuthorizedKey(k)))
}

// TestTerminalCAs: an enrolled agent tells its terminal the node and shape,
// fetches the ticket CA keys with a request signed by the node key, keeps
// them current (a rotation reaches it within CAsInterval), keeps the last
// ones while controld fails, and reports its terminal address in
// heartbeats. controld is played by the test on a bare NATS server.
func TestTerminalCAs(t *testing.T) {
	t.Parallel()
	b := testutil.NATS(t)
	url := b.URL
	nc := b.Connect(t)
	dir := t.TempDir()
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	nodeKey, err := bus.PublicKeyNkey(pub)
	if err != nil {
		t.Fatal(err)
	}
	// The callout's part of controld, as nodeGrant in controld/busauth.
	b.ServeCallout(t, func(cr testutil.Credentials) (testutil.Grant, error) {
		if cr.Nkey != nodeKey {
			return testutil.Grant{}, errors.New("not the node's key")
		}
		return testutil.Grant{Pub: []string{"gpuaas.ctl.host.n-7.>"}, Sub: []string{"gpuaas.host.n-7.>", "_INBOX.n-7.>"}}, nil
	})
	id, _ := json.Marshal(map[string]any{"node_id": "n-7", "name": "h7", "shape": api.ShapeGPUSlice,
		"seed": priv.Seed(), "heartbeat_interval": int64(50 * time.Millisecond)})
	if err := os.WriteFile(filepath.Join(dir, "identity.json"), id, 0o600); err != nil {
		t.Fatal(err)
	}

	oldKey, newKey := caLine(t), caLine(t)
	var mu sync.Mutex
	answer := []string{oldKey} // nil: fail the request
	heartbeatAddr := ""
	failed := 0
	_, err = nc.Subscribe(hostproto.MsgCAs.SubjectOf("n-7"), func(m *nats.Msg) {
		var env signing.Envelope
		var req hostproto.PullRequest
		if json.Unmarshal(m.Data, &env) != nil || signing.Open(pub, env, &req) != nil || req.NodeID != "n-7" {
			t.Errorf("got a CA request not signed by the node: %s", m.Data)
			return
		}
		mu.Lock()
		keys := answer
		mu.Unlock()
		if keys == nil {
			mu.Lock()
			failed++
			mu.Unlock()
			_ = m.RespondMsg(&nats.Msg{Header: nats.Header{"Nats-Service-Error-Code": {"unavailable"},
				"Nats-Service-Error": {"down"}}, Data: []byte(`{"code":"unavailable","message":"down"}`)})
			return
		}
		b, _ := json.Marshal(api.SSHCAsResponse{Internal: keys})
		_ = m.Respond(b)
	})
	if err != nil {
		t.Fatal(err)
	}
	_, err = nc.Subscribe(hostproto.MsgHeartbeat.SubjectOf("n-7"), func(m *nats.Msg) {
		var env signing.Envelope
		var hb hostproto.Heartbeat
		if json.Unmarshal(m.Data, &env) == nil && signing.Open(pub, env, &hb) == nil {
			mu.Lock()
			heartbeatAddr = hb.TerminalAddr
			mu.Unlock()
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	_, _ = nc.Subscribe(hostproto.MsgPull.SubjectOf("n-7"), func(m *nats.Msg) {
		b, _ := json.Marshal(hostproto.PullResponse{})
		_ = m.Respond(b)
	})

	term := &fakeTerminal{}
	a, err := agent.New(agent.Config{Server: url, StateDir: dir, Env: &tasks.Env{}, Handlers: tasks.Registry{},
		TerminalAddr: "127.0.0.1:4242", Terminal: term, CAsInterval: 100 * time.Millisecond, Log: testutil.Logger(t)})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("agent: %v", err)
		}
	})

	testutil.Eventually(t, "the node and the first CA key", func() bool {
		node, shape, trusted := term.get()
		return node == "n-7" && shape == api.ShapeGPUSlice && slices.Equal(trusted, []string{oldKey})
	})
	mu.Lock()
	answer = nil
	mu.Unlock()
	testutil.Eventually(t, "a few failed refreshes", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return failed >= 3
	})
	if _, _, trusted := term.get(); !slices.Equal(trusted, []string{oldKey}) {
		t.Fatalf("got trusted %q after failed refreshes; want the last keys kept", trusted)
	}
	mu.Lock()
	answer = []string{newKey, oldKey}
	mu.Unlock()
	testutil.Eventually(t, "the rotated CA keys", func() bool {
		_, _, trusted := term.get()
		return slices.Equal(trusted, []string{newKey, oldKey})
	})
	testutil.Eventually(t, "the terminal address in a heartbeat", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return heartbeatAddr == "127.0.0.1:4242"
	})
}

// TestTerminalAddrFollowsRestarts: the terminal address is recorded at
// enrollment and replaced by the one a restarted agent heartbeats.
func TestTerminalAddrFollowsRestarts(t *testing.T) {
	t.Parallel()
	env, admin := fleet(t, controld.HostsConfig{})
	tok := enroll(t, admin, "node-term")
	dir := t.TempDir()
	run := func(token, addr string) (nodeID string, stop func()) {
		a, err := agent.New(agent.Config{Server: env.NATSURL, StateDir: dir, Token: token, Env: &tasks.Env{},
			Handlers: newFakeHost().registry(), TerminalAddr: addr, Log: testutil.Logger(t)})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- a.Run(ctx) }()
		select {
		case <-a.Ready():
		case err := <-done:
			t.Fatalf("agent stopped: %v", err)
		}
		return a.NodeID(), func() {
			cancel()
			if err := <-done; err != nil {
				t.Errorf("agent: %v", err)
			}
		}
	}
	stored := func(nodeID string) string {
		var addr string
		if err := env.Server.Pool().QueryRow(context.Background(), `SELECT terminal_addr FROM nodes WHERE id = $1`, nodeID).Scan(&addr); err != nil {
			t.Fatal(err)
		}
		return addr
	}
	nodeID, stop := run(tok, "127.0.0.1:1111")
	if got := stored(nodeID); got != "127.0.0.1:1111" {
		t.Errorf("got terminal address %q after enrollment; want 127.0.0.1:1111", got)
	}
	stop()
	_, stop = run("", "127.0.0.1:2222")
	defer stop()
	testutil.Eventually(t, "the new terminal address", func() bool { return stored(nodeID) == "127.0.0.1:2222" })
}
