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
