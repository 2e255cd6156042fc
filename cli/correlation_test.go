package cli

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/gpuaas/gpuaas/cli/cmdutil"
	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/clientconfig"
	"github.com/gpuaas/gpuaas/internal/corrid"
)

// TestClientSendsCorrelationID: every request of one CLI invocation
// carries the same Gpuaas-Correlation-Id — GPUAAS_CORRELATION_ID when it
// is set and plain, else a fresh id per invocation — and GPUAAS_DEBUG
// shows it on stderr.
func TestClientSendsCorrelationID(t *testing.T) {
	url, b, _ := startNATS(t)
	writeConfig(t, clientconfig.Context{Server: url, UserID: "u-1", Token: testToken, Project: "dev"})
	srv := b.Connect(t)
	got := make(chan *nats.Msg, 8)
	sub, err := srv.Subscribe(api.Subject(api.EndpointAuthWhoami), func(m *nats.Msg) {
		got <- m
		b, _ := json.Marshal(api.WhoamiResponse{User: api.User{ID: "u-1"}})
		_ = m.Respond(b)
	})
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Unsubscribe()
	if err := srv.Flush(); err != nil {
		t.Fatal(err)
	}
	// invocation runs two calls as one CLI run and returns the ids they
	// carried and what it wrote on stderr.
	invocation := func(t *testing.T) (first, second, stderr string) {
		t.Helper()
		ios, _, _, errOut := cmdutil.Test()
		f := NewFactory(ios)
		defer f.Close()
		client, err := f.Client()
		if err != nil {
			t.Fatal(err)
		}
		var ids []string
		for range 2 {
			if _, err := client.Whoami(context.Background()); err != nil {
				t.Fatal(err)
			}
			select {
			case m := <-got:
				ids = append(ids, m.Header.Get(api.HeaderCorrelationID))
			case <-time.After(10 * time.Second):
				t.Fatal("the request did not arrive")
			}
		}
		return ids[0], ids[1], errOut.String()
	}

	t.Run("fresh per invocation", func(t *testing.T) {
		t.Setenv(clientconfig.EnvCorrelationID, "")
		t.Setenv(clientconfig.EnvDebug, "")
		a1, a2, stderr := invocation(t)
		b1, _, _ := invocation(t)
		if !corrid.Valid(a1) || a1 != a2 {
			t.Errorf("one invocation sent %q and %q; want one valid id", a1, a2)
		}
		if b1 == a1 {
			t.Errorf("two invocations both sent %q; want an id each", a1)
		}
		if stderr != "" {
			t.Errorf("stderr %q; want nothing without %s", stderr, clientconfig.EnvDebug)
		}
	})
	t.Run("from the environment, shown in debug", func(t *testing.T) {
		t.Setenv(clientconfig.EnvCorrelationID, "nightly-run-17")
		t.Setenv(clientconfig.EnvDebug, "1")
		a1, a2, stderr := invocation(t)
		if a1 != "nightly-run-17" || a2 != a1 {
			t.Errorf("sent %q and %q; want nightly-run-17", a1, a2)
		}
		if !strings.Contains(stderr, "correlation id nightly-run-17") {
			t.Errorf("stderr %q; want the id shown", stderr)
		}
	})
	t.Run("a bad one from the environment is replaced", func(t *testing.T) {
		t.Setenv(clientconfig.EnvCorrelationID, "two words")
		t.Setenv(clientconfig.EnvDebug, "")
		a1, _, stderr := invocation(t)
		if !corrid.Valid(a1) {
			t.Errorf("sent %q; want a valid id in place of the bad one", a1)
		}
		if !strings.Contains(stderr, "warning: "+clientconfig.EnvCorrelationID) || !strings.Contains(stderr, a1) {
			t.Errorf("stderr %q; want a warning naming the id used", stderr)
		}
	})
}
