package sshconfig

import (
	"bytes"
	"testing"
	"time"

	"github.com/gpuaas/gpuaas/cli/cmdutil"
	"github.com/gpuaas/gpuaas/cli/cmdutil/cmdtest"
	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/clientconfig"
	"github.com/gpuaas/gpuaas/internal/sshkeys/sshkeystest"
	"github.com/gpuaas/gpuaas/internal/testutil"
)

// fixture is a logged-in "dev" context against the controld stand-in.
type fixture struct {
	ctrl   *sshkeystest.Controld
	clock  *testutil.Clock
	cfg    *clientconfig.Config
	dir    string
	env    Env
	out    *bytes.Buffer
	errOut *bytes.Buffer
}

func newFixture(t *testing.T, now time.Time) *fixture {
	t.Helper()
	cmdtest.ClearEnv(t)
	clock := testutil.NewClock(now)
	ctrl := sshkeystest.Start(t, clock.Now)
	dir := t.TempDir()
	cfg, err := clientconfig.Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	cfg.SetContext("dev", clientconfig.Context{Server: ctrl.URL, User: sshkeystest.Email, UserID: sshkeystest.UserID,
		Token: sshkeystest.Token, TokenExpiresAt: now.Add(12 * time.Hour)})
	ios, _, out, errOut := cmdutil.Test()
	f := &fixture{ctrl: ctrl, clock: clock, cfg: cfg, dir: dir, out: out, errOut: errOut}
	f.env = Env{
		IO:     ios,
		Config: func() (*clientconfig.Config, error) { return cfg, nil },
		Active: func() (clientconfig.Active, error) { return cfg.Active(clientconfig.Overrides{}), nil },
		Client: func() (*api.Client, error) {
			return ctrl.Client(cfg.Active(clientconfig.Overrides{}).Token), nil
		},
		Now: clock.Now,
	}
	return f
}
