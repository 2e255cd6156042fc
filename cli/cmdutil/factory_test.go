package cmdutil

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"

	"github.com/gpuaas/gpuaas/cli/config"
	"github.com/gpuaas/gpuaas/internal/api"
)

func startNATS(t *testing.T) string {
	t.Helper()
	s, err := server.NewServer(&server.Options{Host: "127.0.0.1", Port: -1, NoLog: true, NoSigs: true})
	if err != nil {
		t.Fatal(err)
	}
	go s.Start()
	if !s.ReadyForConnections(10 * time.Second) {
		t.Fatal("nats server not ready")
	}
	t.Cleanup(s.Shutdown)
	return s.ClientURL()
}

// writeConfig points the Factory at a fresh config dir holding ctx as the
// current context "dev".
func writeConfig(t *testing.T, ctx config.Context) {
	t.Helper()
	dir := t.TempDir()
	t.Setenv(config.EnvConfigDir, dir)
	for _, env := range []string{config.EnvServer, config.EnvToken, config.EnvProject, config.EnvContext} {
		t.Setenv(env, "")
	}
	cfg, err := config.Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	cfg.SetContext("dev", ctx)
	if err := cfg.Save(); err != nil {
		t.Fatal(err)
	}
}

func TestFactoryIsLazy(t *testing.T) {
	t.Setenv(config.EnvConfigDir, "/nonexistent/never/read")
	ios, _, _, _ := Test()
	f := New(ios)
	f.Close() // nothing to close, nothing dialled
}

func TestClientSendsContextCredentials(t *testing.T) {
	url := startNATS(t)
	writeConfig(t, config.Context{Server: url, UserID: "u-1", Token: "tok", Project: "dev"})

	// Stand in for controld's whoami endpoint and record what arrived.
	srv, err := nats.Connect(url)
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	got := make(chan *nats.Msg, 2)
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

	tests := []struct {
		name        string
		flags       config.Overrides
		wantProject string
	}{
		{"from the context", config.Overrides{}, "dev"},
		{"--project wins", config.Overrides{Project: "ml"}, "ml"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ios, _, _, _ := Test()
			f := New(ios)
			f.Flags = tt.flags
			defer f.Close()
			client, err := f.Client()
			if err != nil {
				t.Fatal(err)
			}
			if _, err := client.Whoami(context.Background()); err != nil {
				t.Fatal(err)
			}
			m := <-got
			if want := api.UserInboxPrefix("u-1") + "."; !strings.HasPrefix(m.Reply, want) {
				t.Errorf("got reply subject %q; want prefix %q", m.Reply, want)
			}
			if a := m.Header.Get(api.HeaderAuthorization); a != "Bearer tok" {
				t.Errorf("got Authorization %q; want Bearer tok", a)
			}
			if p := m.Header.Get(api.HeaderProject); p != tt.wantProject {
				t.Errorf("got project %q; want %q", p, tt.wantProject)
			}
		})
	}
}

func TestClientUnreachableServer(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	url := "nats://" + l.Addr().String()
	l.Close() // nothing listens there now
	writeConfig(t, config.Context{Server: "nats://unused:4222"})
	t.Setenv(config.EnvServer, url)

	ios, _, _, _ := Test()
	f := New(ios)
	_, err = f.Client()
	var apiErr *api.Error
	if !errors.As(err, &apiErr) || apiErr.Code != api.CodeUnavailable {
		t.Fatalf("got %v; want an unavailable api.Error", err)
	}
	if !strings.Contains(apiErr.Hint, "gpuaas dev") || !strings.Contains(apiErr.Hint, url) {
		t.Errorf("got hint %q; want it to mention `gpuaas dev` and %s", apiErr.Hint, url)
	}
	if code := ExitCodeOf(err); code != ExitUnavailable {
		t.Errorf("got exit %d; want %d", code, ExitUnavailable)
	}
}

func TestClientUnknownContext(t *testing.T) {
	writeConfig(t, config.Context{Server: "nats://127.0.0.1:1"})
	ios, _, _, _ := Test()
	f := New(ios)
	f.Flags.Context = "prod"
	_, err := f.Client()
	var fe *FlagError
	if !errors.As(err, &fe) || !strings.Contains(err.Error(), `"prod"`) {
		t.Errorf("got %v; want a usage error naming the context", err)
	}
}
