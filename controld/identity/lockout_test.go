package identity_test

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/gpuaas/gpuaas/controld/identity"
	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/testutil"
)

// TestLimiterAttackerCannotLockOwnerOut: failures are counted per address
// at an account, so an attacker guessing from one address (however long)
// locks only that address; the owner, from theirs, is let through every
// time. Before, five failures from anywhere locked the account for everyone.
func TestLimiterAttackerCannotLockOwnerOut(t *testing.T) {
	t.Parallel()
	pool := openPool(t)
	ctx := t.Context()
	clock := testutil.NewClock(time.Date(2030, 1, 1, 12, 0, 0, 0, time.UTC))
	// The address's own budget, over all accounts, is not what this is about.
	limits := testLimits
	limits.Source.MaxFailures = 100
	l := identity.NewLimiter(limits, clock.Now)
	const victim, attacker, owner = "victim@example.test", "203.0.113.7", "198.51.100.1"

	for i := range testLimits.Account.MaxFailures {
		a, err := l.Begin(ctx, pool, victim, attacker)
		if err != nil {
			t.Fatalf("attacker's guess %d: got %v; want it let through", i+1, err)
		}
		trig := a.Failed()
		if i+1 < testLimits.Account.MaxFailures && len(trig) != 0 {
			t.Fatalf("attacker's guess %d set off %+v; want nothing yet", i+1, trig)
		}
		if i+1 == testLimits.Account.MaxFailures && (len(trig) != 1 || trig[0].Kind != identity.TriggerClient || trig[0].Wait != time.Minute) {
			t.Fatalf("attacker's last free guess set off %+v; want a one-minute lockout of the client", trig)
		}
	}
	_, err := l.Begin(ctx, pool, victim, attacker)
	wantLimited(t, err, 60)
	// The owner, from another address, is not held back, again and again.
	for i := range 3 {
		a, err := l.Begin(ctx, pool, victim, owner)
		if err != nil {
			t.Fatalf("owner's login %d while the attacker is locked out: got %v; want it let through", i+1, err)
		}
		if err := a.Succeeded(ctx, pool); err != nil {
			t.Fatal(err)
		}
	}
	// The attacker keeps trying each time its lockout ends: the lockout
	// grows (doubling; more once its own failures slow the account down,
	// up to MaxLockout), and still only the attacker is held back.
	wait := time.Minute
	for i := range 4 {
		clock.Advance(wait)
		if _, err := l.Begin(ctx, pool, victim, attacker); err != nil {
			t.Fatalf("round %d, after a lockout of %v: got %v; want one try", i+1, wait, err)
		}
		_, err := l.Begin(ctx, pool, victim, attacker)
		var e *api.Error
		if !errors.As(err, &e) || e.Code != api.CodeRateLimited {
			t.Fatalf("round %d: the attacker got %v; want rate_limited", i+1, err)
		}
		next := time.Duration(e.RetryAfterSeconds) * time.Second
		if next < min(2*wait, limits.Account.MaxLockout) {
			t.Fatalf("round %d: the attacker waits %v after a lockout of %v; want at least twice as long (or the cap)", i+1, next, wait)
		}
		wait = next
		a, err := l.Begin(ctx, pool, victim, owner)
		if err != nil {
			t.Fatalf("round %d: the owner got %v; want it let through", i+1, err)
		}
		if err := a.Succeeded(ctx, pool); err != nil {
			t.Fatal(err)
		}
	}
}

// TestLimiterSlowdown: guesses spread over many addresses, each within
// its own budget, slow the account down once it has had
// Slowdown.Failures failures: an address that then fails waits before
// its next try (no free failures left), while an address that has not
// failed at the account is still let through, however many others did.
func TestLimiterSlowdown(t *testing.T) {
	t.Parallel()
	pool := openPool(t)
	ctx := t.Context()
	clock := testutil.NewClock(time.Date(2030, 1, 1, 12, 0, 0, 0, time.UTC))
	l := identity.NewLimiter(testLimits, clock.Now)
	const victim = "victim@example.test"
	bot := func(i int) string { return fmt.Sprintf("192.0.2.%d", i) }

	// Three bots, two guesses each: within each address's budget of 3.
	var started []identity.Trigger
	for i := range 3 {
		for range 2 {
			a, err := l.Begin(ctx, pool, victim, bot(i))
			if err != nil {
				t.Fatalf("bot %d: got %v; want it let through", i, err)
			}
			started = append(started, a.Failed()...)
		}
	}
	if len(started) != 1 || started[0].Kind != identity.TriggerSlowdown || started[0].Failures != testLimits.Slowdown.Failures {
		t.Fatalf("set off %+v; want one slowdown, at failure %d", started, testLimits.Slowdown.Failures)
	}
	// Each bot has failed: it must wait (2 failures, no free one left:
	// twice the lockout after its last).
	for i := range 3 {
		_, err := l.Begin(ctx, pool, victim, bot(i))
		wantLimited(t, err, 120)
	}
	// A fresh address is let through once; its failure locks it out.
	a, err := l.Begin(ctx, pool, victim, bot(9))
	if err != nil {
		t.Fatalf("an address that had not failed: got %v; want it let through", err)
	}
	if trig := a.Failed(); len(trig) != 1 || trig[0].Kind != identity.TriggerClient || trig[0].Wait != time.Minute {
		t.Fatalf("its failure set off %+v; want a one-minute lockout of that client", trig)
	}
	_, err = l.Begin(ctx, pool, victim, bot(9))
	wantLimited(t, err, 60)
	// The owner, who has not failed, logs in, and a success does not end
	// the slowdown others cause.
	owner, err := l.Begin(ctx, pool, victim, "198.51.100.1")
	if err != nil {
		t.Fatalf("the owner during a slowdown: got %v; want it let through", err)
	}
	if err := owner.Succeeded(ctx, pool); err != nil {
		t.Fatal(err)
	}
	_, err = l.Begin(ctx, pool, victim, bot(0))
	wantLimited(t, err, 120)
	// Once the slowdown's window has passed with no failure, budgets are
	// whole again.
	clock.Advance(testLimits.Slowdown.Window + time.Second)
	for range testLimits.Account.MaxFailures {
		if _, err := l.Begin(ctx, pool, victim, bot(5)); err != nil {
			t.Fatalf("after the window: got %v; want the whole budget", err)
		}
	}
}

// TestLimiterSourceLockoutTriggered: the failure that uses up an
// address's budget over all accounts is reported (for the audit log) as a
// lockout of the source, with its wait.
func TestLimiterSourceLockoutTriggered(t *testing.T) {
	t.Parallel()
	pool := openPool(t)
	ctx := t.Context()
	clock := testutil.NewClock(time.Date(2030, 1, 1, 12, 0, 0, 0, time.UTC))
	l := identity.NewLimiter(testLimits, clock.Now)
	const src = "203.0.113.9"
	var trig []identity.Trigger
	for i := range testLimits.Source.MaxFailures {
		a, err := l.Begin(ctx, pool, fmt.Sprintf("user%d@example.test", i), src)
		if err != nil {
			t.Fatalf("attempt %d: %v", i+1, err)
		}
		trig = append(trig, a.Failed()...)
	}
	if len(trig) != 1 || trig[0].Kind != identity.TriggerSource || trig[0].Failures != testLimits.Source.MaxFailures || trig[0].Wait != time.Minute {
		t.Fatalf("set off %+v; want one one-minute lockout of the source at failure %d", trig, testLimits.Source.MaxFailures)
	}
}
