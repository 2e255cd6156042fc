package billing

import "errors"

// Sentinel errors of the package.
var (
	// ErrInvalidEntry is a ledger entry that cannot be booked: unknown
	// kind, missing project or reference, or an amount whose sign does not
	// fit its kind.
	ErrInvalidEntry = errors.New("invalid ledger entry")
	// ErrChainBroken is what Verify reports when an account's entries do
	// not chain or do not add up.
	ErrChainBroken = errors.New("ledger chain broken")
)
