package node

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/gpuaas/gpuaas/controld/lease"
	"github.com/gpuaas/gpuaas/controld/singleton"
)

// Liveness marks nodes down when their heartbeats stop. controld runs it
// on one replica at a time, under the node liveness lease; heartbeats are
// recorded by whichever replica receives them, so it judges what the
// cluster received, from last_heartbeat_at.
//
// Silence only counts while the cluster could record heartbeats:
//   - after the sweeper starts (it takes the lease over, or controld starts
//     again) and after a stall of its own longer than DownAfter (a paused
//     process, a jump of the clock), nodes get DownAfter of grace;
//   - it is measured up to the moment every replica receiving node
//     reports last proved it could record them (Sweep), so heartbeats a
//     replica cut off from Postgres swallows are not silence;
//   - when every node fell silent at once (controld deaf, not the fleet
//     dead), nothing is marked for up to twice DownAfter, and nodes get
//     DownAfter of grace once they are heard again.
//
// The marking commits only while the sweeper still holds its lease
// (lease.Fence): a sweeper that lost it while paused marks nothing.
type Liveness struct {
	Pool *pgxpool.Pool
	// DownAfter is how long a node may stay silent.
	DownAfter time.Duration
	// Beat is the nodes' heartbeat interval.
	Beat time.Duration
	// Interval between sweeps.
	Interval time.Duration
	Now      func() time.Time
	Log      *slog.Logger
}

// Run sweeps every Interval until ctx ends (singleton.Loop).
func (l *Liveness) Run(ctx context.Context) error {
	if l.Pool == nil || l.DownAfter <= 0 || l.Beat <= 0 || l.Interval <= 0 || l.Now == nil || l.Log == nil {
		return errors.New("node liveness: Pool, DownAfter, Beat, Interval, Now and Log are required")
	}
	listening := l.Now()
	last := listening
	return singleton.Loop{Name: "liveness", Interval: l.Interval, Log: l.Log,
		Tick: func(ctx context.Context) ([]any, error) {
			now := l.Now()
			if now.Sub(last) > l.DownAfter || now.Before(last) {
				listening = now
			}
			last = now
			if now.Sub(listening) < l.DownAfter {
				return nil, nil
			}
			down, deaf, err := Sweep(ctx, l.Pool, l.DownAfter, l.Beat, now)
			if err != nil {
				listening = now // a pass that failed saw nothing: grace again
				return nil, err
			}
			if deaf {
				listening = now // no node heard: grace once they are again
			}
			for _, id := range down {
				l.Log.Warn("node down: no heartbeat", "node", id, "for", l.DownAfter)
			}
			return nil, nil
		}}.Run(ctx)
}

// Sweep marks down the nodes silent for longer than downAfter, counting
// only the time the report receivers are known to have been able to
// record heartbeats (lease.Receivers), in one transaction fenced by the
// caller's lease. It returns the nodes it marked down, and deaf when the
// whole fleet fell silent at once (nothing marked).
//
// A node's silence is measured up to the receivers' horizon (the oldest
// of their last lease renewals), not up to now: a receiver cut off from
// Postgres stops renewing at once, so the heartbeats it swallows from then
// on never count as silence. After a receiver's lease lapsed, silence
// counts again only downAfter later.
func Sweep(ctx context.Context, pool *pgxpool.Pool, downAfter, beat time.Duration, now time.Time) (down []string, deaf bool, err error) {
	err = pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		cov, err := lease.Receivers(ctx, tx, lease.ReceiverPrefix, 2*downAfter)
		if err != nil || !cov.Live {
			return err
		}
		// The coverage is in the database's clock, heartbeats in
		// controld's: compare them in controld's.
		skew := now.Sub(cov.Now)
		until := cov.Horizon.Add(skew)
		if until.After(now) {
			until = now
		}
		// The whole fleet silent at once is more likely this side deaf
		// (controld's NATS server cut off from the nodes') than every node
		// dead: for up to twice DownAfter, nothing is marked, and the
		// caller gives the nodes DownAfter of grace once they are heard
		// again. A lone node that dies is marked down after about three
		// times DownAfter.
		fresh, err := freshestHeartbeat(ctx, tx)
		if err != nil {
			return err
		}
		if silent := now.Sub(fresh); !fresh.IsZero() && silent > 2*beat && silent < 2*downAfter+beat {
			deaf = true
			return nil
		}
		if !cov.LastLapse.IsZero() && cov.LastLapse.Add(skew).After(until.Add(-downAfter)) {
			return nil
		}
		if down, err = MarkDown(ctx, tx, until.Add(-downAfter), now); err != nil {
			return err
		}
		return lease.Fence(ctx, tx)
	})
	if err != nil {
		return nil, false, err
	}
	return down, deaf, nil
}

// freshestHeartbeat is the latest heartbeat recorded of any node liveness
// watches (zero when none).
func freshestHeartbeat(ctx context.Context, tx pgx.Tx) (time.Time, error) {
	var fresh *time.Time
	if err := tx.QueryRow(ctx, `SELECT max(last_heartbeat_at) FROM nodes
		WHERE state IN ('ready', 'enrolled') AND public_key IS NOT NULL`).Scan(&fresh); err != nil {
		return time.Time{}, fmt.Errorf("freshest heartbeat: %w", err)
	}
	if fresh == nil {
		return time.Time{}, nil
	}
	return *fresh, nil
}
