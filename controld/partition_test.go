package controld_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/gpuaas/gpuaas/controld/controldtest"
	"github.com/gpuaas/gpuaas/controld/outbox"
	"github.com/gpuaas/gpuaas/controld/store"
	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/devenv/controlplane"
	"github.com/gpuaas/gpuaas/internal/obs"
	"github.com/gpuaas/gpuaas/internal/obs/obstest"
	"github.com/gpuaas/gpuaas/internal/testutil"
)

// cutReplica is a controld replica that reaches Postgres or NATS through
// a proxy the test cuts silently.
type cutReplica struct {
	*controlplane.Controld
	proxy *testutil.SilentProxy
}

// startCutReplica starts a replica of env whose link to dep ("postgres"
// or "nats") goes through a SilentProxy.
func startCutReplica(t *testing.T, env *controldtest.Env, dep string) cutReplica {
	t.Helper()
	dsn, natsURL := env.DSN, env.NATSURL
	var proxy *testutil.SilentProxy
	switch dep {
	case "postgres":
		dsn, proxy = testutil.PostgresVia(t, env.DSN)
	case "nats":
		proxy = testutil.StartSilentProxy(t, "tcp", strings.TrimPrefix(env.NATSURL, "nats://"))
		natsURL = "nats://" + proxy.Addr()
	default:
		t.Fatalf("unknown dependency %q", dep)
	}
	return cutReplica{env.StartReplicaVia(t, dsn, natsURL, nil), proxy}
}

func ownerPool(t *testing.T, dsn string) *pgxpool.Pool {
	t.Helper()
	pool, err := store.Open(context.Background(), dsn, 2)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return pool
}

// TestRelayFailsOverFromCutHolder: when the replica holding the outbox
// relay is silently cut off from Postgres, or from NATS, another replica
// publishes the events committed meanwhile, during the cut. Before, the
// relay's session advisory lock stayed with the cut replica (its Postgres
// session lived on; cut from NATS it could still hold it) and nothing was
// published until the heal.
func TestRelayFailsOverFromCutHolder(t *testing.T) {
	t.Parallel()
	for _, dep := range []string{"postgres", "nats"} {
		t.Run(dep, func(t *testing.T) {
			t.Parallel()
			env := controldtest.Start(t, controldtest.Options{NoNodes: true})
			db := ownerPool(t, env.DSN)
			ctx := context.Background()
			holder := startCutReplica(t, env, dep)
			// The env's first replica hands the relay over as it stops; a
			// third takes the standby's place.
			if err := env.Stop(); err != nil {
				t.Fatal(err)
			}
			testutil.Eventually(t, "the cut replica to hold the relay", func() bool {
				h, err := outbox.RelayHolder(ctx, db)
				return err == nil && h != 0
			})
			env.StartReplica(t, nil)

			holder.proxy.SetCut(true)
			cutAt := time.Now()
			id, err := outbox.Enqueue(ctx, db, time.Now(), outbox.Event{Kind: api.EventNode, Subject: "n-partition"})
			if err != nil {
				t.Fatal(err)
			}
			testutil.EventuallyWithin(t, time.Minute, "the event to be published during the cut", func() bool {
				var state string
				err := db.QueryRow(ctx, `SELECT state FROM outbox_events WHERE id = $1`, id).Scan(&state)
				return err == nil && state == api.OutboxPublished
			})
			t.Logf("cut from %s: event published %v after the cut of the relay's holder", dep,
				time.Since(cutAt).Round(time.Millisecond))
			holder.proxy.SetCut(false)
		})
	}
}

// TestReplicaCutOffStopsServing: a replica silently cut off from Postgres,
// or from NATS, says it is not ready and leaves the API's queue group, so
// that every request is answered by the other replica within the cut; it
// serves again after the heal. Before, it kept its queue subscriptions
// (requests sent to it waited for the heal or timed out) and, cut from
// NATS, /readyz still said ready.
func TestReplicaCutOffStopsServing(t *testing.T) {
	t.Parallel()
	for _, dep := range []string{"postgres", "nats"} {
		t.Run(dep, func(t *testing.T) {
			t.Parallel()
			env := controldtest.Start(t, controldtest.Options{NoNodes: true, MetricsAddr: "127.0.0.1:0"})
			ctx := context.Background()
			cut := startCutReplica(t, env, dep)
			readyz := func() int { code, _ := obstest.Get(t, cut.Server.MetricsURL()+obs.ReadyzPath); return code }
			testutil.Eventually(t, "the second replica ready", func() bool { return readyz() == 200 })
			client := api.NewClient(env.UserConn(t, env.Admin.ID, env.AdminToken), api.WithToken(env.AdminToken),
				api.WithTimeout(1500*time.Millisecond), api.WithAttemptTimeout(1500*time.Millisecond))
			// answered reports whether n requests in a row were answered,
			// each within one short attempt (no retry on another replica).
			answered := func(n int) error {
				for i := range n {
					if _, err := client.CatalogList(ctx); err != nil {
						return fmt.Errorf("request %d: %w", i, err)
					}
				}
				return nil
			}
			if err := answered(10); err != nil {
				t.Fatalf("before the cut: %v", err)
			}

			cut.proxy.SetCut(true)
			start := time.Now()
			var notReady time.Duration
			testutil.EventuallyWithin(t, time.Minute, "the cut replica unready and out of the queue group", func() bool {
				if notReady == 0 && readyz() != 200 {
					notReady = time.Since(start)
				}
				return notReady != 0 && answered(20) == nil
			})
			t.Logf("cut from %s: /readyz failed after %v, every request answered by the other replica after %v", dep,
				notReady.Round(time.Millisecond), time.Since(start).Round(time.Millisecond))

			cut.proxy.SetCut(false)
			healed := time.Now()
			testutil.EventuallyWithin(t, time.Minute, "the replica to serve again after the heal", func() bool {
				return readyz() == 200 && cut.Server.MetricsURL() != ""
			})
			t.Logf("cut from %s: ready again %v after the heal", dep, time.Since(healed).Round(time.Millisecond))
		})
	}
}
