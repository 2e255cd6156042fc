package api

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/micro"
)

// Failover: a call is sent again, within the call's overall timeout, when
// no controld replica took it (no responders) or one took it and did not
// answer in AttemptTimeout (it died, or lost its bus connection, with the
// request on it). What is sent again, and when:
//
//   - reads (Call): on no responders and on timeouts;
//   - mutations (Mutate) whose reply controld keeps for replay: on both,
//     with the same Idempotency-Key, so a retry applies the change at most
//     once and returns the first attempt's reply if it was applied; also
//     when controld answers that the same key is still in progress (the
//     first attempt still runs on a replica that lost its connection);
//   - mutations whose reply is a secret never stored for replay (login with
//     a password or an invite, the OIDC exchange, the gateway's login, user
//     add/invite, node enrollment tokens): only on no responders, when no
//     replica received the request at all. After a timeout the request may
//     have been applied and a replay could not return the token, so a
//     password is not re-sent blindly: the error says so;
//   - raw subjects (Request: hostd's reports and enrollment): never; hostd
//     resends what it must itself.
//
// Every mutation carries an Idempotency-Key (Mutate makes one when the
// caller gave none), so nothing without a key is ever retried.

// DefaultAttemptTimeout bounds one attempt of a call: a replica that took
// the request and went silent is given up on after it.
const DefaultAttemptTimeout = 4 * time.Second

// MaxAttempts bounds the attempts of one call that got no answer; answers
// that the same key is still in progress do not count (retry.go), and no
// attempt starts after the client's timeout (WithTimeout), even when the
// caller's context allows longer.
const MaxAttempts = 4

// WithAttemptTimeout sets the per-attempt timeout (DefaultAttemptTimeout).
func WithAttemptTimeout(d time.Duration) ClientOption {
	return func(c *Client) { c.attemptTimeout = d }
}

// retryPolicy says when a request may be sent again.
type retryPolicy int

const (
	// retryNever: one attempt.
	retryNever retryPolicy = iota
	// retryUndelivered: again only when no replica received it.
	retryUndelivered
	// retryAlways: again on no responders, timeouts and (mutations) a
	// conflict of the same key still in progress.
	retryAlways
)

// policyOf is the retry policy of a call to endpoint by name: its
// declaration's (Spec.retry); an undeclared name (a test sending what the
// types cannot) is retried as a read or a replayable mutation.
func policyOf(endpoint string) retryPolicy {
	if s, ok := Lookup(endpoint); ok {
		return s.retry()
	}
	return retryAlways
}

// send sends msg until it gets an answer, a final error, or the policy,
// MaxAttempts or ctx (the call's overall deadline) says to stop.
func (c *Client) send(ctx context.Context, msg *nats.Msg, endpoint string, policy retryPolicy) (*nats.Msg, error) {
	key := msg.Header.Get(HeaderIdempotencyKey)
	start := time.Now()
	timedOut := false // some attempt may have been applied
	waits := 0        // answers that the same key is still in progress
	var busy error    // the last of those answers
	timeouts := 0     // attempts that got no answer in time
	for attempt := 1; ; attempt++ {
		// An attempt gives up early only if another may follow a timeout:
		// a call that cannot be sent again (a login) waits for its reply
		// until the call's own deadline.
		actx, cancel := ctx, context.CancelFunc(func() {})
		if policy == retryAlways {
			actx, cancel = context.WithTimeout(ctx, c.attemptTimeout)
		}
		reply, err := c.nc.RequestMsgWithContext(actx, msg)
		cancel()
		retry := false
		switch {
		case err == nil:
			code := reply.Header.Get(micro.ErrorCodeHeader)
			if code == "" {
				return reply, nil
			}
			e := decodeError(code, reply)
			var ae *Error
			if !errors.As(e, &ae) || !ae.InProgress || policy != retryAlways {
				return nil, e
			}
			retry, err = true, ae
		case errors.Is(err, nats.ErrNoResponders):
			retry = policy >= retryUndelivered
		case ctx.Err() == nil && (errors.Is(err, context.DeadlineExceeded) || errors.Is(err, nats.ErrTimeout)):
			timedOut = true
			timeouts++
			retry = policy == retryAlways
		case errors.Is(err, context.DeadlineExceeded), errors.Is(err, nats.ErrTimeout):
			timedOut = true
			timeouts++
			if busy != nil && timeouts == 1 {
				// The call's deadline cut short an attempt asking again
				// about a key every answer said was still in progress:
				// that is what is known, not a lost request.
				err, timedOut = busy, false
			}
		}
		if inProgress(err) {
			// Not an attempt lost: the first one is still running. Ask
			// again until it is done, within the call's timeout.
			waits++
			busy = err
		}
		if retry && attempt-waits < c.maxAttempts && time.Since(start) < c.timeout && sleep(ctx, backoff(attempt)) {
			continue
		}
		return nil, failover(endpoint, err, attempt, time.Since(start), key, timedOut, policy)
	}
}

func inProgress(err error) bool {
	var e *Error
	return errors.As(err, &e) && e.InProgress
}

// backoff is the pause before attempt n+1: 100 ms doubling, at most 1 s,
// with ±50% jitter so that clients cut off together do not come back
// together.
func backoff(n int) time.Duration {
	d := min(100*time.Millisecond<<(n-1), time.Second)
	return d/2 + rand.N(d)
}

// sleep waits d unless ctx ends first; it reports whether it waited.
func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

// failover is the error of a call that got no answer after attempts
// attempts: it says how many were made and, for a mutation, names its key.
func failover(endpoint string, err error, attempts int, took time.Duration, key string, timedOut bool, policy retryPolicy) error {
	var e *Error
	if inProgress(err) && errors.As(err, &e) {
		c := *e
		c.Message = fmt.Sprintf("%s (%s; %s)", e.Message, endpoint, tried(attempts, took, key))
		return &c
	}
	if policy == retryNever {
		return transportError(endpoint, err)
	}
	if timedOut && !errors.Is(err, context.Canceled) {
		err = context.DeadlineExceeded
	}
	out := transportError(endpoint, err)
	if !errors.As(out, &e) {
		return out
	}
	c := *e
	c.Message = fmt.Sprintf("%s; %s", e.Message, tried(attempts, took, key))
	switch {
	case errors.Is(e, ErrTimedOut) && key != "" && policy == retryUndelivered:
		c.Hint = "it may have been applied, and its reply cannot be sent again: check before repeating it"
	case errors.Is(e, ErrTimedOut) && key != "":
		c.Hint = fmt.Sprintf("it may have been applied; retry with Idempotency-Key %s, which never applies it twice", key)
	}
	return &c
}

func tried(attempts int, took time.Duration, key string) string {
	s := fmt.Sprintf("%d attempts in %s", attempts, took.Round(100*time.Millisecond))
	if attempts == 1 {
		s = "1 attempt"
	}
	if key != "" {
		s += ", Idempotency-Key " + key
	}
	return s
}
