package volumes

import (
	"context"
	"math"

	"github.com/gpuaas/gpuaas/controld/billing"
	"github.com/gpuaas/gpuaas/controld/catalog"
	"github.com/gpuaas/gpuaas/controld/store"
	"github.com/gpuaas/gpuaas/internal/api"
)

// Quote checks a create as Create does, making nothing, and prices it at
// the catalog's price per GiB-month now (`volume create --dry-run`).
func Quote(ctx context.Context, q store.Querier, a CreateArgs) (api.VolumeQuote, error) {
	n, err := checkCreate(ctx, q, a)
	if err != nil {
		return api.VolumeQuote{}, err
	}
	price, err := catalog.VolumePrice(ctx, q, billing.DefaultCurrency)
	if err != nil {
		return api.VolumeQuote{}, err
	}
	perMonth, perHour := VolumePrices(price, a.SizeBytes)
	return api.VolumeQuote{Name: a.Name, SizeBytes: a.SizeBytes, NodeID: n.ID, Node: n.Name, PricePerGiBMonthMinor: price,
		PricePerMonthMinor: perMonth, PricePerHourMinor: perHour, Currency: billing.DefaultCurrency}, nil
}

// VolumePrices is what size bytes cost at price per GiB-month: a month
// of 730 hours rounded down (as the windows of a month add up to), and an
// hour exactly.
func VolumePrices(pricePerGiBMonthMinor, size int64) (perMonthMinor int64, perHourMinor float64) {
	gib := float64(size) / (1 << 30)
	// size is at most 16 TiB, the price a few hundred: no overflow.
	return pricePerGiBMonthMinor * (size >> 20) / 1024, float64(pricePerGiBMonthMinor) * gib / 730
}

// HourlyMinor is what size bytes add to a project's burn per hour at the
// catalog's price now, rounded up (a funds check errs on the safe side),
// and the price's currency.
func HourlyMinor(ctx context.Context, q store.Querier, size int64) (int64, string, error) {
	price, err := catalog.VolumePrice(ctx, q, billing.DefaultCurrency)
	if err != nil {
		return 0, "", err
	}
	_, perHour := VolumePrices(price, size)
	return int64(math.Ceil(perHour)), billing.DefaultCurrency, nil
}
