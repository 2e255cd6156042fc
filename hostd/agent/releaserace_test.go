package agent_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/gpuaas/gpuaas/controld"
	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/testutil"
)

// TestReleaseRacingProvisioningIsAccepted: releases sent right after the
// create, while hostd (with no delays) provisions and controld moves the
// allocation provisioning → active, are all accepted: no conflict from
// the platform's own transition, every allocation ends released and no
// slot stays held.
func TestReleaseRacingProvisioningIsAccepted(t *testing.T) {
	t.Parallel()
	env, admin := fleet(t, controld.HostsConfig{})
	var nodes []string
	for i := range 2 {
		a := startAgent(t, env, t.TempDir(), enroll(t, admin, fmt.Sprintf("node-r%d", i)), newFakeHost().registry())
		readyNode(t, admin, a.NodeID())
		nodes = append(nodes, a.NodeID())
	}
	ctx := context.Background()
	const total, workers = 50, 4
	ids := make(chan string, total)
	var mu sync.Mutex
	var errs []error
	fail := func(err error) {
		mu.Lock()
		errs = append(errs, err)
		mu.Unlock()
	}
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for i := w; i < total; i += workers {
				a, err := admin.AllocCreate(ctx, api.AllocCreateRequest{SKU: "h200-slice", GPUs: 1})
				if err != nil {
					fail(fmt.Errorf("create %d: %w", i, err))
					return
				}
				ids <- a.ID
				// Spread the releases over provisioning, so that some meet
				// the move to active (hostd has no delays: it takes some tens of ms).
				time.Sleep(time.Duration(i%10) * 5 * time.Millisecond)
				if _, err := admin.AllocRelease(ctx, api.AllocReleaseRequest{ID: a.ID}); err != nil {
					fail(fmt.Errorf("release %s (%d): %w", a.ID, i, err))
					return
				}
				// Wait for the slots to come back before the next create, so
				// capacity never runs out.
				deadline := time.Now().Add(20 * time.Second)
				for {
					got, err := admin.AllocGet(ctx, a.ID)
					if err == nil && got.State == api.AllocReleased {
						break
					}
					if time.Now().After(deadline) {
						fail(fmt.Errorf("%s: got %+v, %v; want released", a.ID, got, err))
						return
					}
					time.Sleep(10 * time.Millisecond)
				}
			}
		})
	}
	wg.Wait()
	close(ids)
	for _, err := range errs {
		if errors.Is(err, api.ErrConflict) {
			t.Errorf("a release racing provisioning got conflict: %v", err)
		} else {
			t.Error(err)
		}
	}
	n := 0
	for id := range ids {
		n++
		if got, err := admin.AllocGet(ctx, id); err != nil || got.State != api.AllocReleased {
			t.Errorf("allocation %s: got %+v, %v; want released", id, got, err)
		}
	}
	if n != total && len(errs) == 0 {
		t.Errorf("created %d; want %d", n, total)
	}
	var fromProvisioning, fromActive int
	if err := env.Server.Pool().QueryRow(ctx, `SELECT count(*) FILTER (WHERE from_state = 'provisioning'),
		count(*) FILTER (WHERE from_state = 'active') FROM allocation_transitions WHERE to_state = 'releasing'`).Scan(&fromProvisioning, &fromActive); err != nil {
		t.Fatal(err)
	}
	t.Logf("released from provisioning %d, from active %d", fromProvisioning, fromActive)
	for _, id := range nodes {
		testutil.Eventually(t, "every slot free on "+id, func() bool {
			d, err := admin.NodeGet(ctx, id)
			return err == nil && d.Node.SlotsFree == 8
		})
	}
}
