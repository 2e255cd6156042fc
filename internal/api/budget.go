package api

import (
	"context"
	"fmt"
	"time"
)

// EventBillingBudget is told to every member of the project when a
// budget's spend crosses its warning level (80 %) or its cap (100 %), once
// per crossing and period; its Data is a BudgetCrossing. The running
// allocations of the budget's scope get an EventAllocNotice of kind
// NoticeBudget too.
const EventBillingBudget = "billing.budget"

// EventBillingBudgetChanged is told to every member of the project when
// a budget is set or cleared; its Data is the Budget.
const EventBillingBudgetChanged = "billing.budget_changed"

// Budget periods: UTC calendar days, ISO weeks (from Monday) and months.
const (
	BudgetDay   = "day"
	BudgetWeek  = "week"
	BudgetMonth = "month"
)

// Budget actions at 100 %.
const (
	// BudgetRefuse refuses new allocations of the scope (the default).
	BudgetRefuse = "refuse"
	// BudgetRelease also releases the scope's running allocations.
	BudgetRelease = "release"
)

// BudgetWarnPercent is the spend, in percent of the cap, at which a
// budget warns.
const BudgetWarnPercent = 80

// BudgetSetRequest sets (creates or replaces) the budget of a project, or
// of one user (email or id) in it. A spend cap is Period with AmountMinor;
// BurnCapMinorPerHour caps what the scope's running allocations cost per
// hour. At least one of the two; zero means none.
type BudgetSetRequest struct {
	Project             string `json:"project,omitempty"`
	User                string `json:"user,omitempty"`
	Period              string `json:"period,omitempty"`
	AmountMinor         int64  `json:"amount_minor,omitempty"`
	BurnCapMinorPerHour int64  `json:"burn_cap_minor_per_hour,omitempty"`
	// Action is BudgetRefuse (default) or BudgetRelease.
	Action string `json:"action,omitempty"`
}

// BudgetClearRequest removes the budget of a project, or of one user in it.
// With Period, only the spend cap of that period goes (the burn cap
// stays; a budget left with no cap goes whole).
type BudgetClearRequest struct {
	Project string `json:"project,omitempty"`
	User    string `json:"user,omitempty"`
	Period  string `json:"period,omitempty"`
}

// Budget is one budget and where its scope stands.
type Budget struct {
	ProjectID string `json:"project_id"`
	Project   string `json:"project"`
	// UserID is empty for the project's own budget.
	UserID string `json:"user_id,omitempty"`
	User   string `json:"user,omitempty"` // the user's email
	// Period and AmountMinor are the spend cap (empty and zero: none).
	Period              string `json:"period,omitempty"`
	AmountMinor         int64  `json:"amount_minor,omitempty"`
	BurnCapMinorPerHour int64  `json:"burn_cap_minor_per_hour,omitempty"`
	Action              string `json:"action"`
	Currency            string `json:"currency"`
	// PeriodStart and PeriodEnd bound the current period (spend cap only).
	PeriodStart *time.Time `json:"period_start,omitempty"`
	PeriodEnd   *time.Time `json:"period_end,omitempty"`
	// SpentMinor is what the scope spent this period: usage booked since
	// the period started and what its running allocations accrued since
	// their last booking.
	SpentMinor int64 `json:"spent_minor"`
	// Percent is SpentMinor of AmountMinor (0 without a spend cap).
	Percent float64 `json:"percent"`
	// BurnMinorPerHour is what the scope's running allocations cost per hour.
	BurnMinorPerHour int64 `json:"burn_minor_per_hour"`
	// RunwaySeconds is how long what is left of the cap lasts at the burn;
	// nil without a spend cap or without burn.
	RunwaySeconds *int64    `json:"runway_seconds,omitempty"`
	UpdatedAt     time.Time `json:"updated_at"`
}

// BudgetList is a project's budgets: its own first, then its users'.
type BudgetList struct {
	ProjectID string   `json:"project_id"`
	Project   string   `json:"project"`
	Budgets   []Budget `json:"budgets"`
}

// BudgetCrossing is the payload of an EventBillingBudget.
type BudgetCrossing struct {
	ProjectID string `json:"project_id"`
	UserID    string `json:"user_id,omitempty"`
	// Percent is the level crossed: BudgetWarnPercent or 100.
	Percent     int       `json:"percent"`
	SpentMinor  int64     `json:"spent_minor"`
	AmountMinor int64     `json:"amount_minor"`
	Currency    string    `json:"currency"`
	Period      string    `json:"period"`
	PeriodEnd   time.Time `json:"period_end"`
	Action      string    `json:"action"`
}

// ValidBudgetPeriod reports whether p is a budget period.
func ValidBudgetPeriod(p string) bool {
	return p == BudgetDay || p == BudgetWeek || p == BudgetMonth
}

// BudgetPeriod returns the UTC calendar period (day, ISO week from
// Monday, month) that contains t.
func BudgetPeriod(period string, t time.Time) (start, end time.Time, err error) {
	t = t.UTC()
	day := time.Date(t.Year(), t.Month(), t.Day(), 0, 0, 0, 0, time.UTC)
	switch period {
	case BudgetDay:
		return day, day.AddDate(0, 0, 1), nil
	case BudgetWeek:
		start = day.AddDate(0, 0, -((int(day.Weekday()) + 6) % 7))
		return start, start.AddDate(0, 0, 7), nil
	case BudgetMonth:
		start = time.Date(t.Year(), t.Month(), 1, 0, 0, 0, 0, time.UTC)
		return start, start.AddDate(0, 1, 0), nil
	}
	return time.Time{}, time.Time{}, fmt.Errorf("unknown budget period %q (want day, week or month)", period)
}

// BillingBudgetSet sets a budget.
func (c *Client) BillingBudgetSet(ctx context.Context, req BudgetSetRequest, opts ...CallOption) (*Budget, error) {
	return Do(ctx, c, OpBillingBudgetSet, req, opts...)
}

// BillingBudgetGet lists a project's budgets and where they stand.
func (c *Client) BillingBudgetGet(ctx context.Context, req BillingRequest) (*BudgetList, error) {
	return Do(ctx, c, OpBillingBudgetGet, req)
}

// BillingBudgetClear removes a budget.
func (c *Client) BillingBudgetClear(ctx context.Context, req BudgetClearRequest, opts ...CallOption) (*Budget, error) {
	return Do(ctx, c, OpBillingBudgetClear, req, opts...)
}
