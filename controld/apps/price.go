package apps

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/gpuaas/gpuaas/controld/images"
	"github.com/gpuaas/gpuaas/controld/store"
	"github.com/gpuaas/gpuaas/internal/api"
)

// An app's own price per hour (docs/apps.md, "Prices";
// docs/decisions/0059-app-prices.md). It is not a manifest key: a renter
// publishes manifests, operators set prices, on platform apps only.

// SetPrice sets the platform app ref's (a name or id) own price per
// hour in currency and returns it with the price before, read under the
// app's lock. A project's app is refused (it costs nothing of its own), as
// is a price below 0 or above api.MaxAppPricePerHourMinor. Setting the
// price it already has changes nothing (Changed false). Workloads
// running keep the price they were run with.
func SetPrice(ctx context.Context, q store.Querier, ref, currency string, perHourMinor int64, now time.Time) (api.AppPrice, error) {
	if perHourMinor < 0 || perHourMinor > api.MaxAppPricePerHourMinor {
		return api.AppPrice{}, api.Errorf(api.CodeInvalidArgument, "price_per_hour: an app's price is from 0 to %s an hour, not %s",
			api.FormatMoney(api.MaxAppPricePerHourMinor, currency), api.FormatMoney(perHourMinor, currency))
	}
	app, err := Find(ctx, q, ref, "", true)
	if errors.Is(err, api.ErrNotFound) {
		var projectID string
		if q.QueryRow(ctx, `SELECT project_id FROM apps WHERE name = $1 AND project_id IS NOT NULL LIMIT 1`, ref).Scan(&projectID) == nil {
			return api.AppPrice{}, api.Errorf(api.CodeInvalidArgument, "app: %s is project %s's own app: only platform apps have a price of their own", ref, projectID).
				WithHint("see `gpuaas admin app-price list`")
		}
	}
	if err != nil {
		return api.AppPrice{}, err
	}
	if app.ProjectID != "" {
		// Find with no project finds platform apps by name; an id can
		// name a project's.
		return api.AppPrice{}, api.Errorf(api.CodeInvalidArgument, "app: %s is project %s's own app: only platform apps have a price of their own", app.ID, app.ProjectID).
			WithHint("see `gpuaas admin app-price list`")
	}
	p := api.AppPrice{AppID: app.ID, App: app.Name, Lifecycle: app.Lifecycle, Currency: currency,
		PricePerHourMinor: perHourMinor, PreviousMinor: app.PricePerHourMinor, Changed: app.PricePerHourMinor != perHourMinor}
	err = q.QueryRow(ctx, `UPDATE apps SET price_per_hour_minor = $2,
			price_updated_at = CASE WHEN $3 THEN $4 ELSE price_updated_at END
		WHERE id = $1 RETURNING price_updated_at`, app.ID, perHourMinor, p.Changed, now.UTC()).Scan(&p.UpdatedAt)
	if err != nil {
		return api.AppPrice{}, fmt.Errorf("set price of app %s: %w", app.ID, err)
	}
	return p, nil
}

// Prices returns every platform app with its own price, by name.
func Prices(ctx context.Context, q store.Querier, currency string) ([]api.AppPrice, error) {
	rows, err := q.Query(ctx, `SELECT id, name, lifecycle, price_per_hour_minor, price_updated_at
		FROM apps WHERE project_id IS NULL ORDER BY name`)
	if err != nil {
		return nil, fmt.Errorf("read app prices: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (api.AppPrice, error) {
		p := api.AppPrice{Currency: currency}
		err := r.Scan(&p.AppID, &p.App, &p.Lifecycle, &p.PricePerHourMinor, &p.UpdatedAt)
		p.PreviousMinor = p.PricePerHourMinor
		return p, err
	})
	if err != nil {
		return nil, fmt.Errorf("read app prices: %w", err)
	}
	return out, nil
}

// PricedImage returns the priced platform app whose image has digest —
// promoted or deprecated, not retired — with the highest price, if any
// (docs/apps.md, "Prices"; docs/decisions/0059-app-prices.md): the price
// follows an app's image bytes, not the name it was run by, so running
// its image directly, under a project app's name, or as another image of
// the same digest — or of the same config digest, recorded at verify: an
// index's per-arch manifest, a re-pushed copy — costs the same. It does
// not see bytes that never went through image verify (a renter's own
// podman storage): docs/apps.md, "Prices", says what that leaves open.
// ok is false when no such app exists.
func PricedImage(ctx context.Context, q store.Querier, digest string) (api.App, bool, error) {
	imageIDs, err := images.SameBytes(ctx, q, digest)
	if err != nil {
		return api.App{}, false, fmt.Errorf("priced app of %s: %w", digest, err)
	}
	if len(imageIDs) == 0 {
		return api.App{}, false, nil
	}
	var id string
	err = q.QueryRow(ctx, `SELECT id FROM apps WHERE project_id IS NULL AND price_per_hour_minor > 0
		AND lifecycle IN ('promoted', 'deprecated') AND image_id = ANY($1)
		ORDER BY price_per_hour_minor DESC, id LIMIT 1`, imageIDs).Scan(&id)
	if errors.Is(err, pgx.ErrNoRows) {
		return api.App{}, false, nil
	}
	if err != nil {
		return api.App{}, false, fmt.Errorf("priced app of %s: %w", digest, err)
	}
	app, err := byID(ctx, q, id, false)
	return app, err == nil, err
}
