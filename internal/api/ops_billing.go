package api

// Endpoints of balances, the ledger, usage, budgets, top-ups and manual
// adjustments. Each is declared here once: its name (Subject(name) is its
// subject; audit rows and logs name it so) and its descriptor, with its
// request and response types, access level and kind (endpoint.go,
// docs/decisions/0013-endpoint-descriptors.md).
const (
	EndpointAdminCredit        = "admin.credit"
	EndpointAdminRefund        = "admin.refund"
	EndpointBillingBalance     = "billing.balance"
	EndpointBillingBudgetClear = "billing.budget_clear"
	EndpointBillingBudgetGet   = "billing.budget_get"
	EndpointBillingBudgetSet   = "billing.budget_set"
	EndpointBillingLedger      = "billing.ledger"
	EndpointBillingTopup       = "billing.topup"
	EndpointBillingUsage       = "billing.usage"
)

var (
	// OpAdminCredit is admin.credit: adjusts a project's balance by hand
	// (admins).
	OpAdminCredit = NewMutation[CreditRequest, CreditResponse](EndpointAdminCredit, AdminOnly)
	// OpAdminRefund is admin.refund: refunds a top-up through Stripe (admins).
	OpAdminRefund = NewMutation[RefundRequest, RefundResponse](EndpointAdminRefund, AdminOnly)
	// OpBillingBalance is billing.balance: returns a project's balance.
	OpBillingBalance = NewQuery[BillingRequest, BillingBalance](EndpointBillingBalance, LoggedIn)
	// OpBillingBudgetClear is billing.budget_clear: removes a budget.
	OpBillingBudgetClear = NewMutation[BudgetClearRequest, Budget](EndpointBillingBudgetClear, LoggedIn)
	// OpBillingBudgetGet is billing.budget_get: lists a project's budgets and
	// where they stand.
	OpBillingBudgetGet = NewQuery[BillingRequest, BudgetList](EndpointBillingBudgetGet, LoggedIn)
	// OpBillingBudgetSet is billing.budget_set: sets a budget.
	OpBillingBudgetSet = NewMutation[BudgetSetRequest, Budget](EndpointBillingBudgetSet, LoggedIn)
	// OpBillingLedger is billing.ledger: lists a project's ledger entries,
	// newest first.
	OpBillingLedger = NewQuery[BillingLedgerRequest, BillingLedgerResponse](EndpointBillingLedger, LoggedIn)
	// OpBillingTopup is billing.topup: starts a Stripe top-up and returns the
	// Checkout URL.
	OpBillingTopup = NewMutation[TopupRequest, TopupResponse](EndpointBillingTopup, LoggedIn)
	// OpBillingUsage is billing.usage: lists a project's usage per allocation,
	// or one allocation's windows.
	OpBillingUsage = NewQuery[BillingUsageRequest, BillingUsageResponse](EndpointBillingUsage, LoggedIn)
)
