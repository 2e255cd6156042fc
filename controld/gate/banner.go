package gate

import (
	"context"
	"fmt"
	"strings"

	"github.com/gpuaas/gpuaas/controld/alloc"
	"github.com/gpuaas/gpuaas/controld/billing"
	"github.com/gpuaas/gpuaas/controld/store"
	"github.com/gpuaas/gpuaas/internal/api"
)

// sessionBanner is the line sshgate writes to an interactive session's
// stderr before the shell (docs/budgets.md, "The login banner"): what the allocation has
// cost so far and costs per hour, how long the project's balance lasts at
// its burn, and, with a spend cap on the project or on the allocation's
// creator, what is left of the tightest one and how long that lasts at
// its scope's burn. It is computed with gate.authorize's answer, so it
// costs the gateway no round trip of its own.
func (h handlers) sessionBanner(ctx context.Context, q store.Querier, a api.Allocation) (string, error) {
	now := h.Now()
	cost, perHour, currency, ok, err := billing.RunningCost(ctx, q, a.ID, now)
	if err != nil || !ok {
		return "", err
	}
	money := func(v int64) string { return api.FormatMoney(v, currency) }
	parts := []string{fmt.Sprintf("gpuaas: %s has cost %s so far at %s/h", a.ID, money(cost), money(perHour))}
	acct, err := billing.AccountOf(ctx, q, a.ProjectID, 0)
	if err != nil {
		return "", err
	}
	if secs, charged := alloc.Runway(acct.BalanceMinor, acct.BurnRateMinorPerHour); charged {
		parts = append(parts, fmt.Sprintf("balance %s lasts %s at the project's %s/h", money(acct.BalanceMinor),
			api.FormatRunway(secs), money(acct.BurnRateMinorPerHour)))
	}
	bs, err := billing.BudgetsFor(ctx, q, a.ProjectID, a.UserID, now)
	if err != nil {
		return "", err
	}
	var tightest *billing.Budget
	var tightestSecs int64
	for i, b := range bs {
		if b.AmountMinor == 0 {
			continue
		}
		secs, charged := alloc.Runway(b.AmountMinor-b.SpentMinor, b.BurnMinorPerHour)
		if charged && (tightest == nil || secs < tightestSecs) {
			tightest, tightestSecs = &bs[i], secs
		}
	}
	if b := tightest; b != nil {
		parts = append(parts, fmt.Sprintf("%s budget: %s left of %s, %s at %s/h", b.Period,
			money(max(0, b.AmountMinor-b.SpentMinor)), money(b.AmountMinor), api.FormatRunway(tightestSecs),
			money(b.BurnMinorPerHour)))
	}
	return strings.Join(parts, "; "), nil
}
