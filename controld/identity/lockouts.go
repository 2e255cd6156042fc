package identity

import "time"

// Kinds of Trigger.
const (
	// TriggerClient: the address is locked out of the account.
	TriggerClient = "client"
	// TriggerSource: the address is locked out of every account.
	TriggerSource = "source"
	// TriggerSlowdown: the account has reached the slowdown's threshold.
	TriggerSlowdown = "slowdown"
)

// Trigger is a limit a failed attempt set off, for the audit log.
type Trigger struct {
	Kind     string
	Failures int // counted against the key with this attempt
	// Wait is how long the key is locked after this failure (none for a
	// slowdown, which holds back only addresses that fail again).
	Wait time.Duration
}

// Failed says which limits the attempt set off, now that it failed: a
// lockout (or a longer one) of the client at the account or of the
// address, and the account's slowdown when this failure started it.
func (a *Attempt) Failed() []Trigger {
	var out []Trigger
	lockout := func(kind string, ok bool, n int, lim Limit) {
		if !ok {
			return
		}
		if until := lim.lockedUntil(n, a.at); !until.IsZero() {
			out = append(out, Trigger{Kind: kind, Failures: n, Wait: until.Sub(a.at)})
		}
	}
	lockout(TriggerClient, a.clientOK, a.clientN, a.clientLimit)
	lockout(TriggerSource, a.sourceOK, a.sourceN, a.l.limits.Source)
	if a.accountOK && a.accountN == a.l.limits.Slowdown.Failures {
		out = append(out, Trigger{Kind: TriggerSlowdown, Failures: a.accountN})
	}
	return out
}
