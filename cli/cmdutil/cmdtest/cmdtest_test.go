package cmdtest

import (
	"errors"
	"os"
	"testing"

	"github.com/spf13/cobra"

	"github.com/gpuaas/gpuaas/cli/cmdutil"
	"github.com/gpuaas/gpuaas/internal/clientconfig"
)

func TestConfigFactory(t *testing.T) {
	t.Setenv(clientconfig.EnvServer, "nats://from-the-developer:4222")
	ios, _, _, _ := cmdutil.Test()
	f, cfg := ConfigFactory(t, ios, &clientconfig.Context{Server: "nats://dev:4222"})
	if got := os.Getenv(clientconfig.EnvServer); got != "" {
		t.Errorf("got %s=%q; want it cleared", clientconfig.EnvServer, got)
	}
	if got, err := f.Config(); err != nil || got != cfg {
		t.Fatalf("Config: %p, %v; want the returned config", got, err)
	}
	active, err := f.Active()
	if err != nil || active.Name != "dev" || active.Server != "nats://dev:4222" {
		t.Fatalf("active: %+v, %v; want dev at nats://dev:4222", active, err)
	}
	if _, err := f.Client(); !errors.Is(err, ErrReachedServer) {
		t.Errorf("client: got %v; want ErrReachedServer", err)
	}
	if got := f.Now(); !got.Equal(Now) {
		t.Errorf("now: got %s; want %s", got, Now)
	}
}

func TestExecute(t *testing.T) {
	want := errors.New("ran")
	var got []string
	cmd := &cobra.Command{Use: "x", RunE: func(_ *cobra.Command, args []string) error { got = args; return want }}
	if err := Execute(cmd, "a", "b"); !errors.Is(err, want) || len(got) != 2 {
		t.Fatalf("got %v with args %v; want %v with [a b]", err, got, want)
	}
}
