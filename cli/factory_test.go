package cli

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/nats-io/nats.go"

	"github.com/gpuaas/gpuaas/cli/cmdutil"
	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/clientconfig"
	"github.com/gpuaas/gpuaas/internal/testutil"
)

// startNATS starts a bus whose callout records what each connection
// presented and lets it in as controld would: the token as user u-1, a key
// as a client before login, anything else refused.
func startNATS(t *testing.T) (string, *testutil.Bus, <-chan testutil.Credentials) {
	t.Helper()
	b := testutil.NATS(t)
	seen := make(chan testutil.Credentials, 16)
	b.ServeCallout(t, func(c testutil.Credentials) (testutil.Grant, error) {
		seen <- c
		switch {
		case c.Token == testToken:
			return testutil.Grant{Pub: []string{api.SubjectPrefix + ".>"}, Sub: []string{api.UserInboxPrefix("u-1") + ".>"}}, nil
		case c.Token == "" && c.Nkey != "":
			return testutil.Grant{Pub: []string{api.SubjectPrefix + ".>"}, Sub: []string{api.InboxPrefix(c.Nkey) + ".>"}}, nil
		}
		return testutil.Grant{}, errors.New("session refused")
	})
	return b.URL, b, seen
}

// testToken is a session token of user u-1 as far as the CLI can tell
// (it reads the subject, controld checks the signature).
var testToken = func() string {
	s, err := jwt.NewWithClaims(jwt.SigningMethodHS256, jwt.RegisteredClaims{Subject: "u-1"}).SignedString([]byte("k"))
	if err != nil {
		panic(err)
	}
	return s
}()

// writeConfig points the Factory at a fresh config dir holding ctx as the
// current context "dev".
func writeConfig(t *testing.T, ctx clientconfig.Context) {
	t.Helper()
	dir := t.TempDir()
	t.Setenv(clientconfig.EnvConfigDir, dir)
	for _, env := range []string{clientconfig.EnvServer, clientconfig.EnvToken, clientconfig.EnvProject, clientconfig.EnvContext} {
		t.Setenv(env, "")
	}
	cfg, err := clientconfig.Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	cfg.SetContext("dev", ctx)
	if err := cfg.Save(); err != nil {
		t.Fatal(err)
	}
}

func TestFactoryIsLazy(t *testing.T) {
	t.Setenv(clientconfig.EnvConfigDir, "/nonexistent/never/read")
	ios, _, _, _ := cmdutil.Test()
	f := NewFactory(ios)
	f.Close() // nothing to close, nothing dialled
}

// TestFactoryEnvReplacesProcessEnvironment: a factory whose Env is set (a
// gateway session's) never reads the process's GPUAAS_* variables (the
// gateway's own), and flags still win over it.
func TestFactoryEnvReplacesProcessEnvironment(t *testing.T) {
	t.Setenv(clientconfig.EnvProject, "gateways-own")
	cfg := &clientconfig.Config{CurrentContext: "ssh", Contexts: map[string]clientconfig.Context{"ssh": {Server: "nats://gw:4222"}}}
	tests := []struct {
		name string
		env  func() clientconfig.Overrides
		flag string
		want string
	}{
		{name: "process environment by default", want: "gateways-own"},
		{name: "the session's environment", env: func() clientconfig.Overrides { return clientconfig.Overrides{Project: "sent"} }, want: "sent"},
		{name: "nothing sent", env: func() clientconfig.Overrides { return clientconfig.Overrides{} }, want: ""},
		{name: "the flag wins", env: func() clientconfig.Overrides { return clientconfig.Overrides{Project: "sent"} }, flag: "flagged", want: "flagged"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ios, _, _, _ := cmdutil.Test()
			f := &cmdutil.Factory{IOStreams: ios, Env: tt.env, Config: func() (*clientconfig.Config, error) { return cfg, nil }}
			f.Flags.Project = tt.flag
			a, err := f.Active()
			if err != nil {
				t.Fatal(err)
			}
			if a.Project != tt.want || a.Server != "nats://gw:4222" {
				t.Errorf("got project %q server %q; want %q on nats://gw:4222", a.Project, a.Server, tt.want)
			}
		})
	}
}

func TestClientSendsContextCredentials(t *testing.T) {
	url, b, seen := startNATS(t)
	writeConfig(t, clientconfig.Context{Server: url, UserID: "u-1", Token: testToken, Project: "dev"})

	// Stand in for controld's whoami endpoint and record what arrived.
	srv := b.Connect(t)
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
		flags       clientconfig.Overrides
		wantProject string
	}{
		{"from the context", clientconfig.Overrides{}, "dev"},
		{"--project wins", clientconfig.Overrides{Project: "ml"}, "ml"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ios, _, _, _ := cmdutil.Test()
			f := NewFactory(ios)
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
			if a := m.Header.Get(api.HeaderAuthorization); a != "Bearer "+testToken {
				t.Errorf("got Authorization %q; want the bearer token", a)
			}
			if c := <-seen; c.Token != testToken || c.Nkey != "" {
				t.Errorf("the connection presented %+v; want the session token", c)
			}
			if p := m.Header.Get(api.HeaderProject); p != tt.wantProject {
				t.Errorf("got project %q; want %q", p, tt.wantProject)
			}
		})
	}
}

// TestClientIdentity: without a live session the CLI connects with a key
// of its own (a client before login, whose replies no one else can read);
// a session the server refuses is "log in again" (exit 4); a plaintext
// connection to a server elsewhere is refused before dialling.
func TestClientIdentity(t *testing.T) {
	url, _, seen := startNATS(t)
	tests := []struct {
		name     string
		ctx      clientconfig.Context
		wantKey  bool
		wantCode int
	}{
		{name: "no session", ctx: clientconfig.Context{Server: url}, wantKey: true},
		{name: "expired session", ctx: clientconfig.Context{Server: url, Token: testToken, TokenExpiresAt: time.Now().Add(-time.Minute)}, wantKey: true},
		{name: "not a token", ctx: clientconfig.Context{Server: url, Token: "garbage"}, wantKey: true},
		{name: "refused session", ctx: clientconfig.Context{Server: url, Token: func() string {
			s, _ := jwt.NewWithClaims(jwt.SigningMethodHS256, jwt.RegisteredClaims{Subject: "u-2"}).SignedString([]byte("k"))
			return s
		}()}, wantCode: cmdutil.ExitUnauthenticated},
		{name: "plaintext to another machine", ctx: clientconfig.Context{Server: "nats://192.0.2.1:4222"}, wantCode: cmdutil.ExitInvalidArgument},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			writeConfig(t, tt.ctx)
			ios, _, _, _ := cmdutil.Test()
			f := NewFactory(ios)
			defer f.Close()
			_, err := f.Client()
			if tt.wantCode != 0 {
				if code := cmdutil.ExitCodeOf(err); code != tt.wantCode {
					t.Fatalf("got %v (exit %d); want exit %d", err, code, tt.wantCode)
				}
				var apiErr *api.Error
				if tt.wantCode == cmdutil.ExitUnauthenticated && (!errors.As(err, &apiErr) || !strings.Contains(apiErr.Hint, "gpuaas login")) {
					t.Errorf("got %v; want a hint to log in", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			c := <-seen
			if tt.wantKey && (c.Nkey == "" || c.Token != "") {
				t.Errorf("the connection presented %+v; want a key of its own and no token", c)
			}
		})
	}
}

// TestClientTLS: a context holding the server's CA reaches a TLS server;
// one without it is refused by the certificate check.
func TestClientTLS(t *testing.T) {
	files := testutil.TLS(t)
	b := testutil.NATSTLS(t, files)
	b.ServeCallout(t, func(c testutil.Credentials) (testutil.Grant, error) {
		return testutil.Grant{Pub: []string{api.SubjectPrefix + ".>"}, Sub: []string{api.InboxPrefix(c.Nkey) + ".>"}}, nil
	})
	writeConfig(t, clientconfig.Context{Server: b.URL, NATSCA: string(files.CAPEM)})
	ios, _, _, _ := cmdutil.Test()
	f := NewFactory(ios)
	c, err := f.Client()
	if err != nil {
		t.Fatal(err)
	}
	if !c.Conn().TLSRequired() {
		t.Error("connected without TLS")
	}
	f.Close()

	writeConfig(t, clientconfig.Context{Server: strings.Replace(b.URL, "nats://", "tls://", 1)})
	f = NewFactory(ios)
	defer f.Close()
	if _, err := f.Client(); err == nil || !strings.Contains(err.Error(), "certificate") {
		t.Fatalf("got %v; want a certificate error without the CA", err)
	}
}

func TestClientUnreachableServer(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	url := "nats://" + l.Addr().String()
	l.Close() // nothing listens there now
	writeConfig(t, clientconfig.Context{Server: "nats://unused:4222"})
	t.Setenv(clientconfig.EnvServer, url)

	ios, _, _, _ := cmdutil.Test()
	f := NewFactory(ios)
	_, err = f.Client()
	var apiErr *api.Error
	if !errors.As(err, &apiErr) || apiErr.Code != api.CodeUnavailable {
		t.Fatalf("got %v; want an unavailable api.Error", err)
	}
	if !strings.Contains(apiErr.Hint, "gpuaas dev") || !strings.Contains(apiErr.Hint, url) {
		t.Errorf("got hint %q; want it to mention `gpuaas dev` and %s", apiErr.Hint, url)
	}
	if code := cmdutil.ExitCodeOf(err); code != cmdutil.ExitUnavailable {
		t.Errorf("got exit %d; want %d", code, cmdutil.ExitUnavailable)
	}
}

func TestClientUnknownContext(t *testing.T) {
	writeConfig(t, clientconfig.Context{Server: "nats://127.0.0.1:1"})
	ios, _, _, _ := cmdutil.Test()
	f := NewFactory(ios)
	f.Flags.Context = "prod"
	_, err := f.Client()
	var fe *cmdutil.FlagError
	if !errors.As(err, &fe) || !strings.Contains(err.Error(), `"prod"`) {
		t.Errorf("got %v; want a usage error naming the context", err)
	}
}
