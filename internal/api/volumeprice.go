package api

import (
	"context"
	"time"
)

// The volume price (docs/volumes.md, "Billing"; docs/decisions/0049-
// volume-sessions-listed-and-priced.md): what a GiB of volume costs for a
// month of 730 hours, set by an admin with `gpuaas admin volume-price set`.

// EventVolumePrice tells that the volume price changed; the Data is a
// VolumePrice (told to no user: an admin's change of the catalog).
const EventVolumePrice = "volume.price"

// MaxVolumePricePerGiBMonthMinor bounds a volume price (10,000.00 a
// GiB-month): a price above it is a typing slip, not a price.
const MaxVolumePricePerGiBMonthMinor = 1_000_000

// VolumePriceSetRequest sets the volume price in Currency (empty: the
// platform's currency).
type VolumePriceSetRequest struct {
	Currency              string `json:"currency,omitempty"`
	PricePerGiBMonthMinor int64  `json:"price_per_gib_month_minor"`
}

// VolumePrice is the price of a GiB of volume for a month in Currency,
// and what it was before the change that returned it.
type VolumePrice struct {
	Currency              string    `json:"currency"`
	PricePerGiBMonthMinor int64     `json:"price_per_gib_month_minor"`
	PreviousMinor         int64     `json:"previous_minor"`
	Changed               bool      `json:"changed"`
	UpdatedAt             time.Time `json:"updated_at"`
}

// AdminVolumePriceSet calls admin.volume_price_set.
func (c *Client) AdminVolumePriceSet(ctx context.Context, req VolumePriceSetRequest, opts ...CallOption) (*VolumePrice, error) {
	return Do(ctx, c, OpAdminVolumePriceSet, req, opts...)
}
