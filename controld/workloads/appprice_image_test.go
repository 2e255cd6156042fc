package workloads_test

import (
	"context"
	"testing"

	"github.com/gpuaas/gpuaas/controld/apps"
	"github.com/gpuaas/gpuaas/internal/api"
)

// TestAppPriceFollowsTheImage (docs/decisions/0059-app-prices.md): the
// price follows the image's digest, not the name a workload is run by.
// The image of a priced platform app run directly (by name or id), a
// project's own image of the same digest, and a project app of the same
// name shadowing the platform's all carry the app's price and id; a
// deprecated app still prices its image, a retired one no longer does.
func TestAppPriceFollowsTheImage(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	ctx := context.Background()
	jup := w.priceApp(t, "jup", "", 360)
	// bob's project's own app of the same name, on the same image: its
	// own price is 0 by CHECK, and `app run jup` picks it.
	w.priceApp(t, "jup", w.project, 0)
	var tinyID string
	if err := w.pool.QueryRow(ctx, `SELECT id FROM images WHERE name = 'tiny'`).Scan(&tinyID); err != nil {
		t.Fatal(err)
	}
	for i, ref := range []string{"tiny", tinyID, "mine", "jup"} { // "mine" has tiny's digest (main_test.go)
		wl, err := w.run(t, w.bob, api.AppRunRequest{Image: ref, AllocationID: w.allocID, Name: "run" + string(rune('a'+i))})
		if err != nil {
			t.Fatalf("run %s: %v", ref, err)
		}
		if wl.AppPricePerHourMinor != 360 || wl.AppID != jup.ID {
			t.Errorf("run %s: price %d of app %q; want 360 of %s (the image's priced app)", ref, wl.AppPricePerHourMinor, wl.AppID, jup.ID)
		}
	}
	if _, err := apps.Apply(ctx, w.pool, jup.ID, api.ImageDeprecated, t0); err != nil {
		t.Fatal(err)
	}
	if wl, err := w.run(t, w.bob, api.AppRunRequest{Image: "tiny", AllocationID: w.allocID, Name: "deprecated"}); err != nil ||
		wl.AppPricePerHourMinor != 360 {
		t.Errorf("run tiny, app deprecated: %+v, %v; want 360", wl, err)
	}
	if _, err := apps.Apply(ctx, w.pool, jup.ID, api.ImageRetired, t0); err != nil {
		t.Fatal(err)
	}
	if wl, err := w.run(t, w.bob, api.AppRunRequest{Image: "tiny", AllocationID: w.allocID, Name: "retired"}); err != nil ||
		wl.AppPricePerHourMinor != 0 || wl.AppID != "" {
		t.Errorf("run tiny, app retired: %+v, %v; want no price", wl, err)
	}
}
