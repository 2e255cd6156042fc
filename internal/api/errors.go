package api

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/gpuaas/gpuaas/internal/clip"
)

// Code is an error code from the one catalog shared by controld, the CLI and
// every other client. Codes are stable wire values; messages are not.
type Code string

// The error catalog (docs/architecture.md, "The data path of a request"). The CLI maps each code to its own exit code.
const (
	CodeUnauthenticated     Code = "unauthenticated"
	CodeForbidden           Code = "forbidden"
	CodeNotFound            Code = "not_found"
	CodeInvalidArgument     Code = "invalid_argument"
	CodeConflict            Code = "conflict"
	CodeNoCapacity          Code = "no_capacity"
	CodeInsufficientFunds   Code = "insufficient_funds"
	CodeRateLimited         Code = "rate_limited"
	CodeIdempotencyMismatch Code = "idempotency_mismatch"
	CodeUnavailable         Code = "unavailable"
	CodeInternal            Code = "internal"
	// CodeBudgetExceeded: a budget of the project (or of the user in it)
	// would be exceeded; insufficient_funds stays for the balance.
	CodeBudgetExceeded Code = "budget_exceeded"
)

// Codes lists every catalog code, in documentation order.
var Codes = []Code{
	CodeUnauthenticated, CodeForbidden, CodeNotFound, CodeInvalidArgument,
	CodeConflict, CodeNoCapacity, CodeInsufficientFunds, CodeRateLimited,
	CodeIdempotencyMismatch, CodeUnavailable, CodeInternal, CodeBudgetExceeded,
}

// Sentinels, one per code: errors.Is(err, api.ErrNotFound) holds for any
// *Error carrying that code, so callers never compare strings.
var (
	ErrUnauthenticated     = &Error{Code: CodeUnauthenticated}
	ErrForbidden           = &Error{Code: CodeForbidden}
	ErrNotFound            = &Error{Code: CodeNotFound}
	ErrInvalidArgument     = &Error{Code: CodeInvalidArgument}
	ErrConflict            = &Error{Code: CodeConflict}
	ErrNoCapacity          = &Error{Code: CodeNoCapacity}
	ErrInsufficientFunds   = &Error{Code: CodeInsufficientFunds}
	ErrRateLimited         = &Error{Code: CodeRateLimited}
	ErrIdempotencyMismatch = &Error{Code: CodeIdempotencyMismatch}
	ErrUnavailable         = &Error{Code: CodeUnavailable}
	ErrInternal            = &Error{Code: CodeInternal}
	ErrBudgetExceeded      = &Error{Code: CodeBudgetExceeded}
)

// Error is the body of every error reply: {code, message, hint}.
type Error struct {
	Code    Code   `json:"code"`
	Message string `json:"message"`
	Hint    string `json:"hint,omitempty"`
	// RetryAfterSeconds, on rate_limited errors, is how long to wait
	// before the same request may succeed (the hint says it in words).
	RetryAfterSeconds int `json:"retry_after_seconds,omitempty"`
	// InProgress, on a conflict, says the same mutation (same
	// Idempotency-Key) is still running, on a replica that may have lost
	// its bus connection: a retry with the key gets its reply once done.
	InProgress bool `json:"in_progress,omitempty"`
	// cause is the transport error behind a client-side error (never sent).
	cause error
}

// Unwrap returns the transport error behind e, if any, so that
// errors.Is(err, api.ErrNoResponders) tells "nothing serves this
// endpoint" apart from other unavailability.
func (e *Error) Unwrap() error { return e.cause }

// Error implements error.
func (e *Error) Error() string {
	if e.Message == "" {
		return string(e.Code)
	}
	return e.Message
}

// Is reports whether target is an *Error with the same code, so that
// errors.Is(err, api.ErrConflict) works for any conflict.
func (e *Error) Is(target error) bool {
	var t *Error
	if !errors.As(target, &t) {
		return false
	}
	return t.Code == e.Code
}

// Errorf builds an *Error with a formatted message. String arguments are
// what the caller sent, mostly: a runaway one is cut (clip.Args), so a
// 100 KB SKU is not echoed back in full.
func Errorf(code Code, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, clip.Args(args)...)}
}

// WithHint returns a copy of e carrying hint.
func (e *Error) WithHint(hint string) *Error {
	c := *e
	c.Hint = hint
	return &c
}

// WithRetryAfter returns a copy of e saying to retry after d (whole
// seconds, rounded up, at least one).
func (e *Error) WithRetryAfter(d time.Duration) *Error {
	c := *e
	c.RetryAfterSeconds = RetryAfterSeconds(d)
	return &c
}

// RetryAfterSeconds rounds d up to whole seconds, at least one.
func RetryAfterSeconds(d time.Duration) int {
	s := int((d + time.Second - 1) / time.Second)
	return max(s, 1)
}

// RateLimited is the rate_limited error: msg, a hint saying when to
// retry, and the machine-readable retry-after.
func RateLimited(msg string, retryAfter time.Duration) *Error {
	secs := RetryAfterSeconds(retryAfter)
	return (&Error{Code: CodeRateLimited, Message: msg,
		Hint: "retry in " + shortDuration(time.Duration(secs)*time.Second)}).WithRetryAfter(retryAfter)
}

// shortDuration is d without zero units: "45s", "2m30s", "1m", "1h".
func shortDuration(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = s[:len(s)-2]
	}
	if strings.HasSuffix(s, "h0m") {
		s = s[:len(s)-2]
	}
	return s
}

// CodeOf returns the catalog code of err, or CodeInternal for errors that
// carry none.
func CodeOf(err error) Code {
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	return CodeInternal
}

// Marshal encodes e as the JSON error body.
func (e *Error) Marshal() []byte {
	b, _ := json.Marshal(e) // a struct of strings always marshals
	return b
}

// Known reports whether c is in the catalog.
func (c Code) Known() bool {
	for _, k := range Codes {
		if k == c {
			return true
		}
	}
	return false
}
