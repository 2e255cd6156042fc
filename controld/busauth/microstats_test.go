package busauth_test

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/micro"

	"github.com/gpuaas/gpuaas/controld/controldtest"
	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/testutil"
)

// TestOperatorSeesMicroStatsErrors: `nats micro stats gpuaas` showed 0
// errors after error replies. With a registered operator key, natscli
// (the NATS project's own client) reads controld's API statistics from
// the system account, and they count the error replies.
func TestOperatorSeesMicroStatsErrors(t *testing.T) {
	t.Parallel()
	natsBin := testutil.NATSCLI(t)
	env := controldtest.Start(t, controldtest.Options{NoNodes: true})
	ctx := t.Context()
	key, pub := newKey(t)
	if _, err := env.Client(env.AdminToken).BusIdentityAdd(ctx, api.BusIdentityAddRequest{PublicKey: pub,
		Kind: api.BusIdentityOperator, Name: "stats-ops"}); err != nil {
		t.Fatal(err)
	}
	seed, err := key.Seed()
	if err != nil {
		t.Fatal(err)
	}
	keyFile := filepath.Join(t.TempDir(), "ops.nk")
	if err := os.WriteFile(keyFile, seed, 0o600); err != nil {
		t.Fatal(err)
	}

	const errorReplies = 3
	for range errorReplies {
		if _, err := env.Client(env.AdminToken).AllocGet(ctx, "a-000000000000"); !errors.Is(err, api.ErrNotFound) {
			t.Fatalf("alloc get of no allocation: got %v; want not found", err)
		}
	}

	// micro counts a reply once its handler has returned, just after the
	// client has it: ask again until the last one is in.
	var stats []micro.Stats
	var errs int
	var last string
	var out []byte
	testutil.Eventually(t, "alloc.get's errors counted", func() bool {
		runCtx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		cmd := exec.CommandContext(runCtx, natsBin, "--server", env.NATSURL, "--nkey", keyFile,
			"micro", "stats", api.ServiceName, "--json")
		cmd.Env = append(os.Environ(), "HOME="+t.TempDir()) // no natscli context of the machine's
		var err error
		if out, err = cmd.CombinedOutput(); err != nil {
			t.Fatalf("nats micro stats %s: %v\n%s", api.ServiceName, err, out)
		}
		stats = nil
		if err := json.Unmarshal(out, &stats); err != nil {
			t.Fatalf("nats micro stats --json: %v\n%s", err, out)
		}
		errs, last = 0, ""
		for _, s := range stats {
			for _, e := range s.Endpoints {
				if e.Name == strings.ReplaceAll(api.EndpointAllocGet, ".", "-") {
					errs += e.NumErrors
					if e.LastError != "" {
						last = e.LastError
					}
				}
			}
		}
		return errs >= errorReplies
	})
	if len(stats) != 1 || errs != errorReplies || !strings.Contains(last, string(api.CodeNotFound)) {
		t.Fatalf("got %d instances, %d alloc-get errors, last %q; want 1 instance, %d errors, the last not_found\n%s",
			len(stats), errs, last, errorReplies, out)
	}

	// Read-only: the operator may not answer or listen on the service.
	op := mustDial(t, env.NATSURL, keyOpts(t, key)[0])
	op.refusedSub(t, "$SRV.>", "")
}
