package workloads_test

import (
	"context"
	"strings"
	"testing"

	"github.com/gpuaas/gpuaas/controld/images"
	"github.com/gpuaas/gpuaas/internal/api"
)

// TestAppPriceFollowsTheConfigDigest (docs/decisions/0059-app-prices.md):
// an image of another manifest digest whose config digest, recorded at
// verify, is that of a priced app's image (an index's per-arch manifest, a
// re-pushed copy) carries the app's price; before its config digest is
// recorded, or with another one, it does not.
func TestAppPriceFollowsTheConfigDigest(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	ctx := context.Background()
	jup := w.priceApp(t, "jup", "", 360)
	repack := w.image(t, "repack", w.project, api.ImagePromoted, api.TrustVerified) // another digest than tiny's
	var tiny api.Image
	var err error
	if tiny, err = images.Find(ctx, w.pool, "tiny", "", false); err != nil || tiny.Digest == repack.Digest {
		t.Fatalf("tiny: %+v, %v; want another digest than %s", tiny, err, repack.Digest)
	}
	record := func(id, config string) {
		t.Helper()
		if _, err := images.RecordCheck(ctx, w.pool, id, images.Check{OK: true, Platform: api.ImagePlatform, ConfigDigest: config}, t0); err != nil {
			t.Fatal(err)
		}
	}
	price := func(name string) (int64, string) {
		t.Helper()
		wl, err := w.run(t, w.bob, api.AppRunRequest{Image: "repack", AllocationID: w.allocID, Name: name})
		if err != nil {
			t.Fatal(err)
		}
		return wl.AppPricePerHourMinor, wl.AppID
	}
	config := "sha256:" + strings.Repeat("c", 64)
	record(tiny.ID, config)
	if p, _ := price("before"); p != 0 {
		t.Errorf("repack without a config digest: price %d; want 0", p)
	}
	record(repack.ID, "sha256:"+strings.Repeat("d", 64))
	if p, _ := price("other"); p != 0 {
		t.Errorf("repack of another config: price %d; want 0", p)
	}
	record(repack.ID, config)
	if p, app := price("same"); p != 360 || app != jup.ID {
		t.Errorf("repack of jup's config: price %d of %q; want 360 of %s", p, app, jup.ID)
	}
}

// TestPriceLookupsUseIndexes: the lookups of every run and of a fault's
// credit (apps.PricedImage's images by digest and config digest,
// billing.CreditFault's app charges of an allocation) have an index
// (migration 0046); with sequential scans priced out the plans use them.
func TestPriceLookupsUseIndexes(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	ctx := context.Background()
	tx, err := w.pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	if _, err := tx.Exec(ctx, `SET LOCAL enable_seqscan = off`); err != nil {
		t.Fatal(err)
	}
	for sql, index := range map[string]string{
		`SELECT id FROM images WHERE digest = 'sha256:x'`:                                         "images_digest",
		`SELECT id FROM images WHERE config_digest = 'sha256:x' AND config_digest <> ''`:          "images_config_digest",
		`SELECT amount_minor FROM app_charges WHERE allocation_id = 'a-1' AND window_end > now()`: "app_charges_allocation",
	} {
		rows, err := tx.Query(ctx, "EXPLAIN "+sql)
		if err != nil {
			t.Fatal(err)
		}
		var plan []string
		for rows.Next() {
			var line string
			if err := rows.Scan(&line); err != nil {
				t.Fatal(err)
			}
			plan = append(plan, line)
		}
		rows.Close()
		if !strings.Contains(strings.Join(plan, "\n"), index) {
			t.Errorf("%s: plan %q; want index %s", sql, plan, index)
		}
	}
}
