package cmdutil

import (
	"context"
	"errors"

	"github.com/gpuaas/gpuaas/internal/api"
)

// Exit codes of the gpuaas command. Scripts may rely on them; the table in
// ExitCodes documents them (`gpuaas help exit-codes`).
const (
	ExitOK                  = 0
	ExitError               = 1
	ExitUsage               = 2
	ExitCancelled           = 3
	ExitUnauthenticated     = 4
	ExitForbidden           = 5
	ExitNotFound            = 6
	ExitInvalidArgument     = 7
	ExitConflict            = 8
	ExitNoCapacity          = 9
	ExitInsufficientFunds   = 10
	ExitRateLimited         = 11
	ExitIdempotencyMismatch = 12
	ExitUnavailable         = 13
	ExitBudgetExceeded      = 14
	// ExitAllocFailed: an allocation waited on ended failed (or
	// release_failed).
	ExitAllocFailed = 20
	// ExitWaitTimeout: a wait ran out of time before the state was reached.
	ExitWaitTimeout = 21
	// ExitJobPlatformFailure: the platform, not the job, ended a job
	// followed by `gpuaas run` or `job wait` (lost, timed out); docker
	// run's convention for its own failures (docs/jobs.md).
	ExitJobPlatformFailure = 125
	// ExitInterrupted is the shell's code for a process killed by SIGINT
	// (128+2), so scripts see the same code whether or not gpuaas caught
	// the signal to clean up first.
	ExitInterrupted = 130
)

// ExitCode documents one exit code.
type ExitCode struct {
	Code    int
	Name    string
	Meaning string
}

// ExitCodes is the documented table, in order. Names of the API codes are
// their catalog codes.
var ExitCodes = []ExitCode{
	{ExitOK, "ok", "success"},
	{ExitError, "error", "any other error, including internal server errors"},
	{ExitUsage, "usage", "bad flags or arguments; nothing was sent to the server"},
	{ExitCancelled, "cancelled", "a confirmation prompt was declined"},
	{ExitUnauthenticated, string(api.CodeUnauthenticated), "not logged in, or the session expired"},
	{ExitForbidden, string(api.CodeForbidden), "logged in but not allowed to do this"},
	{ExitNotFound, string(api.CodeNotFound), "the named object does not exist (or is not visible to you)"},
	{ExitInvalidArgument, string(api.CodeInvalidArgument), "the server rejected a value in the request"},
	{ExitConflict, string(api.CodeConflict), "the object changed or is in the wrong state; retry or re-read"},
	{ExitNoCapacity, string(api.CodeNoCapacity), "no free capacity for the request (see --queue)"},
	{ExitInsufficientFunds, string(api.CodeInsufficientFunds), "the project's balance cannot pay for this (alloc create: too little for the minimum runway); top up with `gpuaas billing topup`"},
	{ExitRateLimited, string(api.CodeRateLimited), "too many requests or failed logins; the hint says when to retry"},
	{ExitIdempotencyMismatch, string(api.CodeIdempotencyMismatch), "the idempotency key was used before with a different request"},
	{ExitUnavailable, string(api.CodeUnavailable), "the server could not be reached or did not answer in time"},
	{ExitBudgetExceeded, string(api.CodeBudgetExceeded), "a budget of the project or of you in it would be exceeded (`gpuaas billing budget get`)"},
	{ExitAllocFailed, "alloc_failed", "the allocation waited on failed (--wait); the reason is printed"},
	{ExitWaitTimeout, "wait_timeout", "the wait ran out of time before the allocation got there"},
	{ExitJobPlatformFailure, "job_platform_failure", "a job followed by `gpuaas run` or `job wait` was ended by the platform (lost, timeout, its workdir upload failed), not by its own exit; the reason is printed. Otherwise those commands exit with the job's own code"},
	{ExitInterrupted, "interrupted", "interrupted by Ctrl-C (SIGINT) or SIGTERM"},
}

var exitByCode = map[api.Code]int{
	api.CodeUnauthenticated:     ExitUnauthenticated,
	api.CodeForbidden:           ExitForbidden,
	api.CodeNotFound:            ExitNotFound,
	api.CodeInvalidArgument:     ExitInvalidArgument,
	api.CodeConflict:            ExitConflict,
	api.CodeNoCapacity:          ExitNoCapacity,
	api.CodeInsufficientFunds:   ExitInsufficientFunds,
	api.CodeRateLimited:         ExitRateLimited,
	api.CodeIdempotencyMismatch: ExitIdempotencyMismatch,
	api.CodeUnavailable:         ExitUnavailable,
	api.CodeInternal:            ExitError,
	api.CodeBudgetExceeded:      ExitBudgetExceeded,
}

// ExitCodeOf maps an error returned by a command to the process exit code.
func ExitCodeOf(err error) int {
	var flagErr *FlagError
	var apiErr *api.Error
	var exitErr *CodedError
	switch {
	case err == nil:
		return ExitOK
	case errors.As(err, &exitErr):
		return exitErr.Code
	case errors.As(err, &flagErr):
		return ExitUsage
	case errors.Is(err, ErrCancelled):
		return ExitCancelled
	case errors.Is(err, context.Canceled):
		return ExitInterrupted
	case errors.As(err, &apiErr):
		if code, ok := exitByCode[apiErr.Code]; ok {
			return code
		}
	}
	return ExitError
}
