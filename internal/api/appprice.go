package api

import (
	"context"
	"time"
)

// An app's own price per hour (docs/apps.md, "Prices";
// docs/decisions/0059-app-prices.md): operators set it on a platform app
// with `gpuaas admin app-price set`; a workload of the app copies it when
// it is run and is charged it, through its allocation, for its running
// time, on top of the allocation's own price.

// EventAppPrice tells that an app's price changed; the Data is an
// AppPrice (told to no user: an operator's change of the catalog).
const EventAppPrice = "app.price"

// MaxAppPricePerHourMinor bounds an app's price (1,000.00 an hour): a
// price above it is a typing slip, not a price.
const MaxAppPricePerHourMinor = 100_000

// AppPriceSetRequest sets the price per hour of the platform app App (a
// name or id) in Currency (empty: the platform's currency).
type AppPriceSetRequest struct {
	App               string `json:"app"`
	Currency          string `json:"currency,omitempty"`
	PricePerHourMinor int64  `json:"price_per_hour_minor"`
}

// AppPrice is a platform app's own price per hour, and what it was before
// the change that returned it.
type AppPrice struct {
	AppID             string     `json:"app_id"`
	App               string     `json:"app"`
	Lifecycle         string     `json:"lifecycle"`
	Currency          string     `json:"currency"`
	PricePerHourMinor int64      `json:"price_per_hour_minor"`
	PreviousMinor     int64      `json:"previous_minor"`
	Changed           bool       `json:"changed"`
	UpdatedAt         *time.Time `json:"updated_at,omitempty"`
}

// AppPriceListRequest asks for every platform app's price.
type AppPriceListRequest struct{}

// AppPriceList is every platform app with its price, by name.
type AppPriceList struct {
	Prices []AppPrice `json:"prices"`
}

// AdminAppPriceSet calls admin.app_price_set.
func (c *Client) AdminAppPriceSet(ctx context.Context, req AppPriceSetRequest, opts ...CallOption) (*AppPrice, error) {
	return Do(ctx, c, OpAdminAppPriceSet, req, opts...)
}

// AdminAppPriceList calls admin.app_price_list.
func (c *Client) AdminAppPriceList(ctx context.Context, opts ...CallOption) (*AppPriceList, error) {
	return Do(ctx, c, OpAdminAppPriceList, AppPriceListRequest{}, opts...)
}
