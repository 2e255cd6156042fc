package billingapi

import (
	"context"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/gpuaas/gpuaas/controld/alloc"
	"github.com/gpuaas/gpuaas/controld/audit"
	"github.com/gpuaas/gpuaas/controld/billing"
	"github.com/gpuaas/gpuaas/controld/endpoint"
	"github.com/gpuaas/gpuaas/controld/identity"
	"github.com/gpuaas/gpuaas/controld/mutate"
	"github.com/gpuaas/gpuaas/controld/outbox"
	"github.com/gpuaas/gpuaas/controld/project"
	"github.com/gpuaas/gpuaas/controld/store"
	"github.com/gpuaas/gpuaas/internal/api"
)

// budgetUser resolves the user of a user budget (email or id), who must
// be a member of the project; "" is the project's own budget.
func budgetUser(ctx context.Context, q store.Querier, projectID, ref string) (api.User, error) {
	ref = strings.TrimSpace(ref)
	if ref == "" {
		return api.User{}, nil
	}
	var u api.User
	var err error
	if strings.Contains(ref, "@") {
		u, err = identity.UserByEmail(ctx, q, ref)
	} else {
		u, err = identity.UserByID(ctx, q, ref)
	}
	if err != nil {
		return api.User{}, api.Errorf(api.CodeNotFound, "no user %s", ref)
	}
	role, err := project.RoleOf(ctx, q, projectID, u.ID)
	if err != nil {
		return api.User{}, err
	}
	if role == "" {
		return api.User{}, api.Errorf(api.CodeInvalidArgument, "%s is not a member of the project", u.Email).
			WithHint("see `gpuaas project members`")
	}
	return u, nil
}

// budgetSet sets a budget of a project or of a member (owners and
// admins).
func (h handlers) budgetSet(ctx context.Context, r *endpoint.Request, req api.BudgetSetRequest) (endpoint.Work[api.Budget], error) {
	ref, err := project.Ref(ctx, h.DB, r, req.Project)
	if err != nil {
		return nil, err
	}
	b := billing.Budget{Period: req.Period, AmountMinor: req.AmountMinor, BurnCapMinorPerHour: req.BurnCapMinorPerHour,
		Action: req.Action}
	if b.Action == "" {
		b.Action = api.BudgetRefuse
	}
	if err := billing.CheckBudget(b); err != nil {
		return nil, err
	}
	return func(ctx context.Context, tx pgx.Tx) (*api.Budget, mutate.Effect, error) {
		p, err := project.Authorize(ctx, tx, ref, r.Principal.UserID, r.Principal.Role, project.AccessAdmin)
		if err != nil {
			return nil, mutate.Effect{}, err
		}
		u, err := budgetUser(ctx, tx, p.ID, req.User)
		if err != nil {
			return nil, mutate.Effect{}, err
		}
		b.ProjectID, b.UserID = p.ID, u.ID
		set, err := billing.SetBudget(ctx, tx, b, r.Principal.UserID, h.Now())
		if err != nil {
			return nil, mutate.Effect{}, err
		}
		out := budgetOf(set, p, u.Email)
		eff, err := budgetEffect(ctx, tx, api.EndpointBillingBudgetSet, out)
		return &out, eff, err
	}, nil
}

// budgetClear clears a budget, or one period of it (owners and admins).
func (h handlers) budgetClear(ctx context.Context, r *endpoint.Request, req api.BudgetClearRequest) (endpoint.Work[api.Budget], error) {
	ref, err := project.Ref(ctx, h.DB, r, req.Project)
	if err != nil {
		return nil, err
	}
	return func(ctx context.Context, tx pgx.Tx) (*api.Budget, mutate.Effect, error) {
		p, err := project.Authorize(ctx, tx, ref, r.Principal.UserID, r.Principal.Role, project.AccessAdmin)
		if err != nil {
			return nil, mutate.Effect{}, err
		}
		u, err := budgetUser(ctx, tx, p.ID, req.User)
		if err != nil {
			return nil, mutate.Effect{}, err
		}
		var cleared billing.Budget
		gone := true
		if req.Period == "" {
			cleared, err = billing.ClearBudget(ctx, tx, p.ID, u.ID, h.Now())
		} else {
			cleared, gone, err = billing.ClearBudgetPeriod(ctx, tx, p.ID, u.ID, req.Period, h.Now())
		}
		if err != nil {
			return nil, mutate.Effect{}, err
		}
		out := budgetOf(cleared, p, u.Email)
		if !gone { // what is left: the burn cap
			out.Period, out.AmountMinor, out.SpentMinor, out.Percent = "", 0, 0, 0
		}
		eff, err := budgetEffect(ctx, tx, api.EndpointBillingBudgetClear, out)
		return &out, eff, err
	}, nil
}

// budgetEffect is the audit row of a budget change and its
// billing.budget_changed event (a Budget) to the project's members.
func budgetEffect(ctx context.Context, tx pgx.Tx, action string, b api.Budget) (mutate.Effect, error) {
	users, err := project.MemberIDs(ctx, tx, b.ProjectID)
	if err != nil {
		return mutate.Effect{}, err
	}
	target := b.ProjectID
	if b.UserID != "" {
		target += "/" + b.UserID
	}
	return mutate.Effect{
		Audit: audit.Entry{Action: action, TargetType: "budget", TargetID: target, ProjectID: b.ProjectID,
			Detail: map[string]any{"user_id": b.UserID, "period": b.Period, "amount_minor": b.AmountMinor,
				"burn_cap_minor_per_hour": b.BurnCapMinorPerHour, "action": b.Action}},
		Events: []outbox.Event{{Kind: api.EventBillingBudgetChanged, Subject: b.ProjectID, ProjectID: b.ProjectID,
			Users: users, Payload: b}},
	}, nil
}

// budgetGet lists a project's budgets with their spend (members).
func (h handlers) budgetGet(ctx context.Context, r *endpoint.Request, req api.BillingRequest) (*api.BudgetList, error) {
	p, err := Project(ctx, h.DB, r, req.Project)
	if err != nil {
		return nil, err
	}
	now := h.Now()
	bs, err := billing.Budgets(ctx, h.DB, p.ID, now)
	if err != nil {
		return nil, err
	}
	out := api.BudgetList{ProjectID: p.ID, Project: p.Name, Budgets: make([]api.Budget, 0, len(bs))}
	for _, b := range bs {
		email := ""
		if b.UserID != "" {
			if u, err := identity.UserByID(ctx, h.DB, b.UserID); err == nil {
				email = u.Email
			}
		}
		out.Budgets = append(out.Budgets, budgetOf(b, p, email))
	}
	return &out, nil
}

// budgetOf is the wire form of a budget.
func budgetOf(b billing.Budget, p api.Project, email string) api.Budget {
	out := api.Budget{ProjectID: p.ID, Project: p.Name, UserID: b.UserID, User: email, Period: b.Period,
		AmountMinor: b.AmountMinor, BurnCapMinorPerHour: b.BurnCapMinorPerHour, Action: b.Action, Currency: b.Currency,
		SpentMinor: b.SpentMinor, Percent: b.Percent(), BurnMinorPerHour: b.BurnMinorPerHour, UpdatedAt: b.UpdatedAt.UTC()}
	if b.Period != "" {
		start, end := b.PeriodStart.UTC(), b.PeriodEnd.UTC()
		out.PeriodStart, out.PeriodEnd = &start, &end
		if secs, ok := alloc.Runway(b.AmountMinor-b.SpentMinor, b.BurnMinorPerHour); ok {
			out.RunwaySeconds = &secs
		}
	}
	return out
}
