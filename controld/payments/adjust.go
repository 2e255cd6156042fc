package payments

import (
	"context"

	"github.com/jackc/pgx/v5"

	"github.com/gpuaas/gpuaas/controld/audit"
	"github.com/gpuaas/gpuaas/controld/billing"
	"github.com/gpuaas/gpuaas/controld/mutate"
	"github.com/gpuaas/gpuaas/controld/outbox"
	"github.com/gpuaas/gpuaas/controld/project"
	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/ids"
)

// MaxAdjustmentMinor bounds one manual adjustment either way, so a slip of
// the keyboard cannot mint or erase a fortune (1,000,000.00).
const MaxAdjustmentMinor = 100_000_000

// Adjust records an operator's manual credit (positive) or debit
// (negative) of a project as an adjustment entry carrying the reason, with
// its audit row and event, in tx. It needs no Stripe.
func (s *Service) Adjust(ctx context.Context, tx pgx.Tx, projectID, actorID string, req api.CreditRequest) (api.CreditResponse, mutate.Effect, error) {
	var none mutate.Effect
	if err := ValidateAdjustment(req); err != nil {
		return api.CreditResponse{}, none, err
	}
	entry, _, err := billing.Append(ctx, tx, billing.Entry{ProjectID: projectID, Kind: billing.KindAdjustment,
		Reference: ids.New("adj"), AmountMinor: req.AmountMinor, Currency: s.cfg.Currency, Memo: req.Reason, ActorID: actorID, CreatedAt: s.now()})
	if err != nil {
		return api.CreditResponse{}, none, wrap("record adjustment", err)
	}
	balance, err := billing.Balance(ctx, tx, projectID)
	if err != nil {
		return api.CreditResponse{}, none, wrap("project balance", err)
	}
	resp := api.CreditResponse{LedgerEntryID: entry.ID, ProjectID: projectID, AmountMinor: req.AmountMinor,
		Currency: s.cfg.Currency, Reason: req.Reason, BalanceMinor: balance}
	users, err := project.MemberIDs(ctx, tx, projectID)
	if err != nil {
		return api.CreditResponse{}, none, err
	}
	return resp, mutate.Effect{
		Audit: audit.Entry{Action: api.EndpointAdminCredit, TargetType: "project", TargetID: projectID, ProjectID: projectID,
			Detail: resp},
		Events: []outbox.Event{{Kind: api.EventAdjustment, Subject: projectID, ProjectID: projectID, Users: users, Payload: resp}},
	}, nil
}

// ValidateAdjustment checks an adjustment before any work: a non-zero
// amount within MaxAdjustmentMinor and a reason.
func ValidateAdjustment(req api.CreditRequest) error {
	if req.AmountMinor == 0 {
		return api.Errorf(api.CodeInvalidArgument, "an adjustment of zero changes nothing").
			WithHint("a positive amount credits, a negative one debits")
	}
	if req.AmountMinor > MaxAdjustmentMinor || req.AmountMinor < -MaxAdjustmentMinor {
		return api.Errorf(api.CodeInvalidArgument, "an adjustment is at most %s either way", api.FormatMoney(MaxAdjustmentMinor, ""))
	}
	return ValidateReason(req.Reason, true)
}
