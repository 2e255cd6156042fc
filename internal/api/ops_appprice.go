package api

// Endpoints of apps' own prices (appprice.go; docs/apps.md, "Prices"),
// declared here once (endpoint.go).
const (
	EndpointAdminAppPriceSet  = "admin.app_price_set"
	EndpointAdminAppPriceList = "admin.app_price_list"
)

var (
	// OpAdminAppPriceSet is admin.app_price_set: sets a platform app's own
	// price per hour (operators and admins; audited, with an app.price
	// event; running workloads keep the price they started with).
	OpAdminAppPriceSet = NewMutation[AppPriceSetRequest, AppPrice](EndpointAdminAppPriceSet, OperatorOnly)
	// OpAdminAppPriceList is admin.app_price_list: every platform app
	// with its price per hour (operators and admins).
	OpAdminAppPriceList = NewQuery[AppPriceListRequest, AppPriceList](EndpointAdminAppPriceList, OperatorOnly)
)
