package controldtest

import (
	"log/slog"
	"testing"

	"github.com/gpuaas/gpuaas/internal/devenv/controlplane"
	"github.com/gpuaas/gpuaas/internal/testutil"
)

// StartReplicaVia is StartReplica reaching the env's database at dsn and
// its NATS server at natsURL instead: the same ones, through proxies the
// test can cut (testutil.SilentProxy), so that one replica alone is
// partitioned.
func (e *Env) StartReplicaVia(t testing.TB, dsn, natsURL string, log *slog.Logger) *controlplane.Controld {
	t.Helper()
	opts := e.opts
	opts.Log = log
	ctl := startControld(t, &testutil.Bus{URL: natsURL, Keys: e.Bus.Keys}, dsn, opts)
	t.Cleanup(func() {
		if err := ctl.Stop(); err != nil {
			t.Errorf("controld replica run: %v", err)
		}
	})
	return ctl
}
