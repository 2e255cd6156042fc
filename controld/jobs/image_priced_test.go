package jobs_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/gpuaas/gpuaas/controld/apps"
	"github.com/gpuaas/gpuaas/controld/billing"
	"github.com/gpuaas/gpuaas/internal/api"
)

// TestJobRefusesAPricedAppsImage (docs/decisions/0059-app-prices.md): a
// job naming the image of a priced platform app — by its name, by its
// digest reference — is refused naming the app and its price, since a
// job has no app meter, and nothing is written; once the app is free
// again the image runs as a job.
func TestJobRefusesAPricedAppsImage(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	ctx := context.Background()
	img := w.image(t, "jupimg", "", api.ImagePromoted, api.TrustVerified)
	app, err := apps.Publish(ctx, w.pool, apps.New{Name: "jup", ImageID: img.ID, By: w.bob.UserID,
		Manifest: api.AppManifest{Command: []string{"/bin/httpd"}}}, t0)
	if err == nil {
		_, err = apps.Apply(ctx, w.pool, app.ID, api.ImagePromoted, t0)
	}
	if err != nil {
		t.Fatal(err)
	}
	setPrice := func(minor int64) {
		t.Helper()
		if err := w.tx(t, func(tx pgx.Tx) error {
			_, err := apps.SetPrice(ctx, tx, "jup", billing.DefaultCurrency, minor, t0)
			return err
		}); err != nil {
			t.Fatal(err)
		}
	}
	setPrice(250)
	for _, ref := range []string{"jupimg", img.Ref} {
		before := w.count(t, `SELECT count(*) FROM jobs`)
		_, err := w.create(t, api.JobCreateRequest{AllocationID: w.allocID, Run: "true", Image: ref})
		if !errors.Is(err, api.ErrInvalidArgument) || !strings.Contains(err.Error(), "is the image of app jup, priced $2.50/h") ||
			!strings.Contains(err.Error(), "gpuaas app run jup") {
			t.Errorf("job with image %s: %v; want refused naming app jup at $2.50/h", ref, err)
		}
		if n := w.count(t, `SELECT count(*) FROM jobs`); n != before {
			t.Errorf("job with image %s: %d jobs after a refusal; want %d", ref, n, before)
		}
	}
	setPrice(0)
	if _, err := w.create(t, api.JobCreateRequest{AllocationID: w.allocID, Run: "true", Image: "jupimg"}); err != nil {
		t.Errorf("job with the image of a free app: %v; want it created", err)
	}
}

// TestQueuedJobRefusedWhenItsImageIsPriced: a job queued with an image
// that becomes the image of a priced platform app before its allocation
// is active is not started: it fails with job.create's refusal.
func TestQueuedJobRefusedWhenItsImageIsPriced(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	ctx := context.Background()
	img := w.image(t, "q-priced", "", api.ImagePromoted, api.TrustVerified)
	allocID := w.queuedAlloc(t)
	j, err := w.create(t, api.JobCreateRequest{AllocationID: allocID, Run: "true", Queue: true, Image: img.Name})
	if err != nil || j.State != api.JobQueued {
		t.Fatalf("created %+v, %v; want queued", j, err)
	}
	app, err := apps.Publish(ctx, w.pool, apps.New{Name: "qapp", ImageID: img.ID, By: w.bob.UserID,
		Manifest: api.AppManifest{Command: []string{"/bin/httpd"}}}, t0)
	if err == nil {
		_, err = apps.Apply(ctx, w.pool, app.ID, api.ImagePromoted, t0)
	}
	if err == nil {
		err = w.tx(t, func(tx pgx.Tx) error {
			_, err := apps.SetPrice(ctx, tx, "qapp", billing.DefaultCurrency, 100, t0)
			return err
		})
	}
	if err != nil {
		t.Fatal(err)
	}
	w.setAlloc(t, allocID, api.AllocActive, "")
	w.advance(t, allocID)
	got := w.job(t, j.ID)
	if got.State != api.JobFailed || !strings.Contains(got.Reason, "is the image of app qapp, priced $1.00/h") {
		t.Errorf("job %s %q; want failed, the image of app qapp", got.State, got.Reason)
	}
	if n := w.count(t, `SELECT count(*) FROM node_tasks WHERE params->>'job_id' = $1`, j.ID); n != 0 {
		t.Errorf("%d node tasks; want none", n)
	}
}
