package context

import (
	"strings"
	"testing"
	"time"

	"github.com/gpuaas/gpuaas/cli/cmdutil"
	"github.com/gpuaas/gpuaas/cli/cmdutil/cmdtest"
	"github.com/gpuaas/gpuaas/internal/clientconfig"
)

var now = cmdtest.Now // the clock of cmdtest.Factory

// factoryWithContexts is cmdtest's factory over a config with two contexts, dev
// (current, logged in until now+2h) and prod (logged out).
func factoryWithContexts(t *testing.T, ios *cmdutil.IOStreams) (*cmdutil.Factory, *clientconfig.Config) {
	t.Helper()
	f, cfg := cmdtest.ConfigFactory(t, ios, nil)
	cfg.SetContext("dev", clientconfig.Context{Server: "nats://127.0.0.1:4222", User: "ada@example.com", Token: "secret-dev-token",
		TokenExpiresAt: now.Add(2 * time.Hour), Project: "ml"})
	cfg.SetContext("prod", clientconfig.Context{Server: "tls://gpuaas.example.com:4222", Gateway: "gpuaas.example.com:22",
		Token: "secret-stale-token", TokenExpiresAt: now.Add(-time.Hour)})
	if err := cfg.Save(); err != nil {
		t.Fatal(err)
	}
	return f, cfg
}

// reload reads the config file back from disk.
func reload(t *testing.T, cfg *clientconfig.Config) *clientconfig.Config {
	t.Helper()
	c, err := clientconfig.Load(strings.TrimSuffix(cfg.Path(), "/"+clientconfig.FileName))
	if err != nil {
		t.Fatal(err)
	}
	return c
}
