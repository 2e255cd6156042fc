package mutate

import "errors"

// ErrNoAuditAction refuses a mutation whose effect names no audit action:
// every mutation writes exactly one audit row saying what it did, so one
// that would not is a bug, answered as an internal error with nothing
// committed.
var ErrNoAuditAction = errors.New("mutation has no audit action")
