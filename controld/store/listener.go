package store

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Listener is a LISTEN connection of its own (not the pool's, since pgx
// connections are not shared), made again after Postgres ended it. Its
// owner polls on a ticker as well, so a lost connection delays work by a
// tick rather than losing it: Notified only wakes the owner early.
type Listener struct {
	// Name says whose notifications these are, in log lines ("dispatcher").
	Name    string
	Pool    *pgxpool.Pool
	Channel string
	Log     *slog.Logger

	notified chan struct{}
	conn     *pgx.Conn
	lost     chan struct{} // closed when conn stops receiving
	down     time.Time     // when listening stopped; zero while listening or before the first
}

// Notified receives (at most one pending value) when a notification
// arrived on the channel.
func (l *Listener) Notified() <-chan struct{} {
	if l.notified == nil {
		l.notified = make(chan struct{}, 1)
	}
	return l.notified
}

// Ensure listens, unless it already does; a failure is logged once per
// outage (the owner keeps polling meanwhile).
func (l *Listener) Ensure(ctx context.Context) {
	l.Notified()
	if l.conn != nil {
		select {
		case <-l.lost:
			l.Close(ctx)
			if ctx.Err() != nil {
				return
			}
			l.down = time.Now()
			l.Log.Warn(l.Name + ": notifications lost; polling until Postgres listens again")
		default:
			return
		}
	}
	if err := l.listen(ctx); err != nil {
		if ctx.Err() == nil && l.down.IsZero() {
			l.down = time.Now()
			l.Log.Warn(l.Name+": cannot listen for notifications; polling until it can", "err", err)
		}
		return
	}
	if !l.down.IsZero() {
		l.Log.Info(l.Name+": listening for notifications again", "outage", time.Since(l.down).Round(time.Millisecond))
		l.down = time.Time{}
	}
}

func (l *Listener) listen(ctx context.Context) error {
	pc, err := l.Pool.Acquire(ctx)
	if err != nil {
		return fmt.Errorf("%s: %w", l.Name, err)
	}
	conn := pc.Hijack()
	// Channel is one of our constants, a plain identifier: the
	// statement's text is what pg_stat_activity shows of the listener.
	if _, err := conn.Exec(ctx, "LISTEN "+l.Channel); err != nil {
		_ = conn.Close(context.WithoutCancel(ctx))
		return fmt.Errorf("%s listen: %w", l.Name, err)
	}
	lost := make(chan struct{})
	go func() {
		defer close(lost)
		for {
			if _, err := conn.WaitForNotification(ctx); err != nil {
				return
			}
			select {
			case l.notified <- struct{}{}:
			default:
			}
		}
	}()
	l.conn, l.lost = conn, lost
	return nil
}

// Close ends the LISTEN connection once its reader has stopped (the
// connection was lost, or ctx ended).
func (l *Listener) Close(ctx context.Context) {
	if l.conn == nil {
		return
	}
	<-l.lost
	_ = l.conn.Close(context.WithoutCancel(ctx))
	l.conn, l.lost = nil, nil
}
