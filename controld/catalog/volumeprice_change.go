package catalog

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/gpuaas/gpuaas/controld/store"
	"github.com/gpuaas/gpuaas/internal/api"
)

// ChangeVolumePrice sets the price of a GiB of volume for a month in
// currency (minor units, 0 to api.MaxVolumePricePerGiBMonthMinor) and
// returns it with the price before, read under the row's lock so that two
// admins changing it at once each see the other's. Setting the price it
// already has changes nothing (Changed false, updated_at kept). Volumes
// being charged keep the price their meter started at until resized
// (docs/decisions/0024-volume-meters.md).
func ChangeVolumePrice(ctx context.Context, q store.Querier, currency string, perGiBMonthMinor int64, now time.Time) (api.VolumePrice, error) {
	if perGiBMonthMinor < 0 || perGiBMonthMinor > api.MaxVolumePricePerGiBMonthMinor {
		return api.VolumePrice{}, api.Errorf(api.CodeInvalidArgument, "a volume price is from 0 to %s a GiB-month, not %s",
			api.FormatMoney(api.MaxVolumePricePerGiBMonthMinor, currency), api.FormatMoney(perGiBMonthMinor, currency))
	}
	p := api.VolumePrice{Currency: currency, PricePerGiBMonthMinor: perGiBMonthMinor}
	err := q.QueryRow(ctx, `SELECT price_per_gib_month_minor, updated_at FROM volume_prices WHERE currency = $1 FOR UPDATE`,
		currency).Scan(&p.PreviousMinor, &p.UpdatedAt)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		p.Changed = true
	case err != nil:
		return api.VolumePrice{}, fmt.Errorf("change volume price: %w", err)
	default:
		p.Changed = p.PreviousMinor != perGiBMonthMinor
	}
	if !p.Changed {
		return p, nil
	}
	if err := q.QueryRow(ctx, `INSERT INTO volume_prices (currency, price_per_gib_month_minor, updated_at) VALUES ($1, $2, $3)
		ON CONFLICT (currency) DO UPDATE SET price_per_gib_month_minor = excluded.price_per_gib_month_minor,
			updated_at = excluded.updated_at RETURNING updated_at`, currency, perGiBMonthMinor, now).Scan(&p.UpdatedAt); err != nil {
		return api.VolumePrice{}, fmt.Errorf("change volume price: %w", err)
	}
	return p, nil
}
