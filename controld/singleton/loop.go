// Package singleton is what controld's leader-only periodic loops share
// (billing accrual, the idle evaluator, node liveness): a loop that runs
// a tick every interval until its context ends — under controld's
// singleton lease (controld/lease), whose loss ends that context — and
// the transaction-scoped advisory lock a tick takes so that two replicas
// never run it at once (docs/decisions/0008-advisory-lock-singletons.md).
package singleton

import (
	"context"
	"errors"
	"log/slog"
	"time"
)

// Ticker is a source of ticks: C receives one per interval until Stop.
// time.Ticker is one; tests drive a loop with their own.
type Ticker interface {
	C() <-chan time.Time
	Stop()
}

// realTicker is time.Ticker as a Ticker.
type realTicker struct{ t *time.Ticker }

func (r realTicker) C() <-chan time.Time { return r.t.C }
func (r realTicker) Stop()               { r.t.Stop() }

// NewTicker returns a time.Ticker ticking every d, as a Ticker.
func NewTicker(d time.Duration) Ticker { return realTicker{time.NewTicker(d)} }

// Loop runs Tick every Interval (after a first wait of one interval, as a
// time.Ticker does) until the context Run was given ends.
type Loop struct {
	// Name names the loop in its log lines ("billing tick").
	Name string
	// Interval between ticks. Required.
	Interval time.Duration
	// Tick does one round of work. A non-empty summary is logged at
	// info level (key-value pairs for slog), an error at warn level
	// unless the context ended; either way the loop goes on. Required.
	Tick func(ctx context.Context) (summary []any, err error)
	// Log receives the lines above (default: discarded).
	Log *slog.Logger
	// NewTicker makes the loop's ticker (default NewTicker).
	NewTicker func(time.Duration) Ticker
}

// Run ticks until ctx ends, then returns nil. It fails only on a Loop
// without its required fields.
func (l Loop) Run(ctx context.Context) error {
	if l.Interval <= 0 || l.Tick == nil {
		return errors.New("singleton loop " + l.Name + ": Interval and Tick are required")
	}
	if l.Log == nil {
		l.Log = slog.New(slog.DiscardHandler)
	}
	if l.NewTicker == nil {
		l.NewTicker = NewTicker
	}
	t := l.NewTicker(l.Interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C():
		}
		summary, err := l.Tick(ctx)
		switch {
		case err != nil && ctx.Err() == nil:
			l.Log.Warn(l.Name, "err", err)
		case err == nil && len(summary) > 0:
			l.Log.Info(l.Name, summary...)
		}
	}
}
