package webhooks

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"slices"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/gpuaas/gpuaas/controld/outbox"
	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/ids"
)

// ingestConsumer is the durable consumer of the EVENTS stream shared by
// every controld replica: each event is taken by one of them.
const ingestConsumer = "webhooks"

// Ingest turns the events of the EVENTS stream into deliveries, one per
// webhook of the event's project subscribed to its kind, until ctx ends.
// An event is acked once its deliveries are committed; one redelivered
// (a replica stopped before the ack) makes no second row (the unique
// webhook_id, event_seq). The consumer starts at the events published
// after it was first created: webhooks see no history. kick, when set, is
// signalled after new deliveries are committed.
func Ingest(ctx context.Context, pool *pgxpool.Pool, js jetstream.JetStream, now func() time.Time, log *slog.Logger, kick func()) error {
	cons, err := js.CreateOrUpdateConsumer(ctx, api.EventStreamName, jetstream.ConsumerConfig{
		Durable:       ingestConsumer,
		AckPolicy:     jetstream.AckExplicitPolicy,
		DeliverPolicy: jetstream.DeliverNewPolicy,
		MaxAckPending: 256,
	})
	if err != nil {
		return fmt.Errorf("webhook consumer: %w", err)
	}
	var lastErr atomic.Pointer[error]
	cc, err := cons.Consume(func(m jetstream.Msg) {
		var ev api.Event
		if err := json.Unmarshal(m.Data(), &ev); err != nil {
			log.Error("webhooks: undecodable event", "err", err)
			_ = m.Term()
			return
		}
		if ev.ProjectID == "" || !slices.Contains(api.WebhookEvents, ev.Kind) {
			_ = m.Ack()
			return
		}
		meta, err := m.Metadata()
		if err != nil {
			_ = m.Nak()
			return
		}
		ev.Seq = meta.Sequence.Stream
		n, err := enqueueEvent(ctx, pool, ev, now())
		if err != nil && ctx.Err() != nil {
			return // stopping: the event is not acked, so JetStream hands it out again
		}
		if err != nil {
			log.Warn("webhooks: queue deliveries; retrying", "event", ev.ID, "err", err)
			_ = m.NakWithDelay(time.Second)
			return
		}
		_ = m.Ack()
		if n > 0 && kick != nil {
			kick()
		}
	}, jetstream.ConsumeErrHandler(func(_ jetstream.ConsumeContext, err error) { lastErr.Store(&err) }))
	if err != nil {
		return fmt.Errorf("webhook consume: %w", err)
	}
	defer cc.Stop()
	return outbox.WaitConsume(ctx, cons, cc, &lastErr)
}

// enqueueEvent queues a delivery of ev to each webhook of its project
// subscribed to its kind, in one transaction, and returns how many.
func enqueueEvent(ctx context.Context, pool *pgxpool.Pool, ev api.Event, now time.Time) (int, error) {
	n := 0
	err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		rows, err := tx.Query(ctx, `SELECT id FROM webhooks
			WHERE project_id = $1 AND removed_at IS NULL AND $2 = ANY (events)`, ev.ProjectID, ev.Kind)
		if err != nil {
			return err
		}
		hooks, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			return err
		}
		for _, h := range hooks {
			id := ids.New(deliveryPrefix)
			b, err := json.Marshal(body{ID: id, Kind: ev.Kind, At: ev.At.UTC(), ProjectID: ev.ProjectID,
				Subject: ev.Subject, Seq: ev.Seq, Data: ev.Data})
			if err != nil {
				return err
			}
			tag, err := tx.Exec(ctx, `INSERT INTO webhook_deliveries (id, webhook_id, event_seq, event_kind, body,
				state, next_attempt_at, created_at) VALUES ($1, $2, $3, $4, $5, 'pending', $6, $6)
				ON CONFLICT (webhook_id, event_seq) WHERE event_seq > 0 DO NOTHING`,
				id, h, int64(ev.Seq), ev.Kind, b, now.UTC())
			if err != nil {
				return err
			}
			n += int(tag.RowsAffected())
		}
		return nil
	})
	return n, err
}
