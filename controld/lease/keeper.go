package lease

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// DefaultTTL is Keeper.TTL's default: a singleton fails over within about
// a TTL and a third after its holder stopped renewing.
const DefaultTTL = 6 * time.Second

// Keeper holds leases for one replica (Holder).
type Keeper struct {
	Pool *pgxpool.Pool
	// Holder names the replica; unique per process.
	Holder string
	// TTL is how long a lease runs without renewal (default DefaultTTL);
	// the holder renews it every TTL/3 and stops acting TTL/6 before it
	// could expire.
	TTL time.Duration
	Log *slog.Logger
}

func (k *Keeper) ttl() time.Duration {
	if k.TTL <= 0 {
		return DefaultTTL
	}
	return k.TTL
}

// hold is how long after sending a successful renewal the holder may
// act: less than the TTL the database counts from when it ran it.
func (k *Keeper) hold() time.Duration { return k.ttl() - k.ttl()/6 }

type tokenKey struct{}

// FromContext returns the lease the context's work runs under.
func FromContext(ctx context.Context) (Token, bool) {
	tok, ok := ctx.Value(tokenKey{}).(Token)
	return tok, ok
}

// Fence fails with ErrLost unless the lease ctx's work runs under (Run)
// still runs, locking its row until tx ends (Check): singleton writes
// call it in their transaction, last. Work outside a lease (a test
// calling a tick directly) is not fenced.
func Fence(ctx context.Context, tx pgx.Tx) error {
	tok, ok := FromContext(ctx)
	if !ok {
		return nil
	}
	return Check(ctx, tx, tok)
}

// Run waits until it holds lease name, then runs fn under a context that
// carries the token (Fence) and ends when the lease is lost: not renewed
// within its deadline, or taken. It releases the lease when fn returns,
// and returns fn's error, ErrLost, or nil when ctx ended.
func (k *Keeper) Run(ctx context.Context, name string, fn func(context.Context) error) error {
	return k.run(ctx, name, fn, true)
}

// RunLapsing is Run for a lease that is never released: it lapses when
// the holder stops renewing it (report receivers: see Receivers).
func (k *Keeper) RunLapsing(ctx context.Context, name string, fn func(context.Context) error) error {
	return k.run(ctx, name, fn, false)
}

func (k *Keeper) run(ctx context.Context, name string, fn func(context.Context) error, release bool) error {
	tok, deadline, err := k.acquire(ctx, name)
	if err != nil || ctx.Err() != nil {
		return err
	}
	if k.Log != nil {
		k.Log.Debug("lease acquired", "lease", name, "epoch", tok.Epoch)
	}
	held, lose := context.WithCancelCause(context.WithValue(ctx, tokenKey{}, tok))
	defer lose(nil)
	renewed := make(chan struct{})
	go func() { defer close(renewed); k.renew(held, lose, tok, deadline) }()
	err = fn(held)
	lost := context.Cause(held)
	lose(nil)
	<-renewed
	if release && !errors.Is(lost, ErrLost) {
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), k.ttl()/3)
		if rerr := Release(rctx, k.Pool, tok); rerr != nil && k.Log != nil {
			k.Log.Debug("release lease", "lease", name, "err", rerr)
		}
		cancel()
	}
	switch {
	case ctx.Err() != nil:
		return nil
	case errors.Is(lost, ErrLost):
		return lost
	}
	return err
}

// acquire tries every TTL/3 until it holds the lease or ctx ends.
func (k *Keeper) acquire(ctx context.Context, name string) (Token, time.Time, error) {
	t := time.NewTicker(k.ttl() / 3)
	defer t.Stop()
	for {
		actx, cancel := context.WithTimeout(ctx, k.ttl()/3)
		sent := time.Now()
		tok, ok, err := TryAcquire(actx, k.Pool, name, k.Holder, k.ttl())
		cancel()
		if ok {
			return tok, sent.Add(k.hold()), nil
		}
		if ctx.Err() != nil {
			return Token{}, time.Time{}, nil
		}
		if err != nil && k.Log != nil {
			k.Log.Debug("acquire lease", "lease", name, "err", err)
		}
		select {
		case <-ctx.Done():
			return Token{}, time.Time{}, nil
		case <-t.C:
		}
	}
}

// renew keeps tok's lease every TTL/3, retrying failures until deadline;
// it ends held (with ErrLost) when the deadline passes unrenewed or the
// lease is gone. A renewal that hangs is cut off at the deadline, so a
// holder cut off from the database stops by itself.
func (k *Keeper) renew(held context.Context, lose context.CancelCauseFunc, tok Token, deadline time.Time) {
	every := k.ttl() / 3
	t := time.NewTimer(every)
	defer t.Stop()
	for {
		select {
		case <-held.Done():
			return
		case <-t.C:
		}
		rctx, cancel := context.WithDeadline(held, deadline)
		sent := time.Now()
		ok, err := Renew(rctx, k.Pool, tok, k.ttl())
		cancel()
		switch {
		case held.Err() != nil:
			return
		case err == nil && ok:
			deadline = sent.Add(k.hold())
			t.Reset(every)
		case err == nil:
			lose(fmt.Errorf("%s (epoch %d) expired or taken: %w", tok.Name, tok.Epoch, ErrLost))
			return
		case !time.Now().Before(deadline):
			lose(fmt.Errorf("%s (epoch %d) not renewed before its deadline (%v): %w", tok.Name, tok.Epoch, err, ErrLost))
			return
		default:
			t.Reset(min(every/4, time.Until(deadline)))
		}
	}
}
