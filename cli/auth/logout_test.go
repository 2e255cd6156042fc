package auth

import (
	"context"
	"errors"
	"testing"

	"github.com/gpuaas/gpuaas/cli/cmdutil"
	"github.com/gpuaas/gpuaas/cli/cmdutil/cmdtest"
	"github.com/gpuaas/gpuaas/internal/clientconfig"
)

func TestNewCmdLogout(t *testing.T) {
	ios, _, _, _ := cmdtest.Streams(false)
	f, _ := cmdtest.ConfigFactory(t, ios, nil)
	called := false
	cmd := NewCmdLogout(f, func(context.Context, *LogoutOptions) error { called = true; return nil })
	if err := cmdtest.Execute(cmd); err != nil || !called {
		t.Fatalf("got %v, called %v; want nil, true", err, called)
	}
	err := cmdtest.Execute(NewCmdLogout(f, nil), "extra")
	var fe *cmdutil.FlagError
	if !errors.As(err, &fe) {
		t.Errorf("got %v; want a usage error", err)
	}
}

func TestLogoutWithoutTokenNeedsNoServer(t *testing.T) {
	ios, _, _, errOut := cmdtest.Streams(false)
	f, _ := cmdtest.ConfigFactory(t, ios, &clientconfig.Context{Server: "nats://dev:4222", User: "ada@example.com"})
	opts := &LogoutOptions{IO: ios, Config: f.Config, Active: f.Active, Client: f.Client}
	if err := logoutRun(context.Background(), opts); err != nil {
		t.Fatalf("got %v; want nil (Client must not be called)", err)
	}
	if got, want := errOut.String(), "Not logged in (context dev)\n"; got != want {
		t.Errorf("got %q; want %q", got, want)
	}
}

func TestLogoutKeepsTokenWhenServerUnreachable(t *testing.T) {
	ios, _, _, _ := cmdtest.Streams(false)
	f, cfg := cmdtest.ConfigFactory(t, ios, &clientconfig.Context{Server: "nats://dev:4222", Token: "tok"})
	opts := &LogoutOptions{IO: ios, Config: f.Config, Active: f.Active, Client: f.Client}
	if err := logoutRun(context.Background(), opts); !errors.Is(err, cmdtest.ErrReachedServer) {
		t.Fatalf("got %v; want the server error", err)
	}
	if c, _ := cfg.Context("dev"); c.Token != "tok" {
		t.Errorf("token was dropped although the session was not revoked")
	}
}

func TestClearToken(t *testing.T) {
	ios, _, _, _ := cmdtest.Streams(false)
	_, cfg := cmdtest.ConfigFactory(t, ios, &clientconfig.Context{Server: "nats://dev:4222", User: "ada@example.com", UserID: "u-1",
		Token: "tok", TokenExpiresAt: now, Project: "dev"})
	if !clearToken(cfg, "dev") {
		t.Fatal("got no change; want the token cleared")
	}
	want := clientconfig.Context{Server: "nats://dev:4222", User: "ada@example.com", UserID: "u-1", Project: "dev"}
	if got, _ := cfg.Context("dev"); got != want {
		t.Errorf("got %+v; want %+v", got, want)
	}
	if clearToken(cfg, "dev") || clearToken(cfg, "missing") {
		t.Error("got a change with nothing to clear")
	}
}
