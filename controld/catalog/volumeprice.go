package catalog

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/gpuaas/gpuaas/controld/store"
	"github.com/gpuaas/gpuaas/internal/api"
)

// DefaultVolumePricePerGiBMonthMinor is the price of a GiB of volume for
// a month (730 hours) that fresh installs start with (migration 0030):
// $0.10, what RunPod asks for a volume disk. Operators change it in
// volume_prices (docs/volumes.md, "Billing").
const DefaultVolumePricePerGiBMonthMinor = 10

// VolumePrice returns the price of a GiB of volume for a month of 730
// hours in currency.
func VolumePrice(ctx context.Context, q store.Querier, currency string) (perGiBMonthMinor int64, err error) {
	err = q.QueryRow(ctx, `SELECT price_per_gib_month_minor FROM volume_prices WHERE currency = $1`, currency).Scan(&perGiBMonthMinor)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, api.Errorf(api.CodeNotFound, "no volume price in %s", currency)
	}
	if err != nil {
		return 0, fmt.Errorf("volume price: %w", err)
	}
	return perGiBMonthMinor, nil
}

// SetVolumePrice sets the price of a GiB of volume for a month in
// currency (minor units, ≥ 0). Volumes already charged keep the price
// their meter started at until they are resized.
func SetVolumePrice(ctx context.Context, q store.Querier, currency string, perGiBMonthMinor int64) error {
	if perGiBMonthMinor < 0 {
		return api.Errorf(api.CodeInvalidArgument, "volume price %d is negative", perGiBMonthMinor)
	}
	if _, err := q.Exec(ctx, `INSERT INTO volume_prices (currency, price_per_gib_month_minor, updated_at)
		VALUES ($1, $2, now()) ON CONFLICT (currency) DO UPDATE SET price_per_gib_month_minor = excluded.price_per_gib_month_minor,
			updated_at = excluded.updated_at`, currency, perGiBMonthMinor); err != nil {
		return fmt.Errorf("set volume price: %w", err)
	}
	return nil
}
