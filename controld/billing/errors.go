package billing

import (
	"errors"
	"fmt"

	"github.com/gpuaas/gpuaas/controld/mutate"
)

// Sentinel errors of the package.
var (
	// ErrInvalidEntry is a ledger entry that cannot be booked: unknown
	// kind, missing project or reference, or an amount whose sign does not
	// fit its kind.
	ErrInvalidEntry = errors.New("invalid ledger entry")
	// ErrChainBroken is what Verify reports when an account's entries do
	// not chain or do not add up.
	ErrChainBroken = errors.New("ledger chain broken")
	// ErrBudgetsAppeared is what QueueNoBudgetsGuard's statement reports:
	// a budget binding the creator exists although none did when the
	// caller decided it needed no budget check. It is mutate.ErrStale:
	// mutate.Runner runs the mutation again, and the new run reads it.
	ErrBudgetsAppeared = fmt.Errorf("budgets appeared: %w", mutate.ErrStale)
)
