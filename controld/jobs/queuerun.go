package jobs

import (
	"context"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/gpuaas/gpuaas/controld/outbox"
	"github.com/gpuaas/gpuaas/internal/api"
)

// queueConsumer is the durable consumer of alloc.state events shared by
// every controld replica: each event is taken by one of them.
const queueConsumer = "jobs-queue"

// RunQueue starts and ends queued jobs as their allocations change state,
// until ctx ends (queue.go). It follows the alloc.state events of the
// EVENTS stream with a durable consumer: an event is acked only once
// Advance's transaction committed, so one that a stopped or restarted
// controld did not finish is delivered again, to this replica or another.
// Before it consumes, it advances every queued job once: events published
// before the consumer first existed, or past the stream's retention, are
// not lost either. Advance is idempotent, so a repeat changes nothing.
func RunQueue(ctx context.Context, pool *pgxpool.Pool, js jetstream.JetStream, cfg Config, now func() time.Time, log *slog.Logger) error {
	cons, err := js.CreateOrUpdateConsumer(ctx, api.EventStreamName, jetstream.ConsumerConfig{
		Durable:       queueConsumer,
		AckPolicy:     jetstream.AckExplicitPolicy,
		DeliverPolicy: jetstream.DeliverNewPolicy,
		FilterSubject: api.EventSubject(api.EventAllocState),
		MaxAckPending: 256,
	})
	if err != nil {
		return fmt.Errorf("job queue consumer: %w", err)
	}
	if err := CatchUp(ctx, pool, cfg, now); err != nil {
		return err
	}
	var lastErr atomic.Pointer[error]
	cc, err := cons.Consume(func(m jetstream.Msg) {
		allocID, err := allocOfEvent(m.Data())
		if err != nil {
			log.Error("job queue: undecodable event", "err", err)
			_ = m.Term()
			return
		}
		err = AdvanceAllocation(ctx, pool, allocID, cfg, now())
		if err != nil && ctx.Err() != nil {
			return // stopping: not acked, so JetStream hands it out again
		}
		if err != nil {
			log.Warn("job queue: advance; retrying", "allocation", allocID, "err", err)
			_ = m.NakWithDelay(time.Second)
			return
		}
		_ = m.Ack()
	}, jetstream.ConsumeErrHandler(func(_ jetstream.ConsumeContext, err error) { lastErr.Store(&err) }))
	if err != nil {
		return fmt.Errorf("job queue consume: %w", err)
	}
	defer cc.Stop()
	return outbox.WaitConsume(ctx, cons, cc, &lastErr)
}

// CatchUp advances the queued job of every allocation that has one.
func CatchUp(ctx context.Context, pool *pgxpool.Pool, cfg Config, now func() time.Time) error {
	allocs, err := queuedAllocations(ctx, pool)
	if err != nil {
		return err
	}
	for _, id := range allocs {
		if err := AdvanceAllocation(ctx, pool, id, cfg, now()); err != nil {
			return err
		}
	}
	return nil
}

// AdvanceAllocation runs Advance for one allocation in a transaction of
// its own, its events enqueued in it.
func AdvanceAllocation(ctx context.Context, pool *pgxpool.Pool, allocID string, cfg Config, now time.Time) error {
	return pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		events, err := Advance(ctx, tx, allocID, cfg, now)
		if err != nil {
			return err
		}
		for _, ev := range events {
			if _, err := outbox.Enqueue(ctx, tx, now, ev); err != nil {
				return err
			}
		}
		return nil
	})
}
