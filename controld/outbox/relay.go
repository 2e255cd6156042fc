package outbox

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/gpuaas/gpuaas/controld/lease"
	"github.com/gpuaas/gpuaas/internal/api"
)

// DuplicateWindow is how long JetStream remembers a Nats-Msg-Id. A relay
// that dies after publishing but before marking its rows republishes them
// on restart; JetStream drops those duplicates within this window.
const DuplicateWindow = 10 * time.Minute

// idleInBatchMargin is how long past AckTimeout a batch's transaction may
// idle before the server ends it.
const idleInBatchMargin = 2 * time.Second

// DefaultAckTimeout is RelayConfig.AckTimeout's default.
const DefaultAckTimeout = 10 * time.Second

// NewJetStream returns a JetStream context on nc for the relay (JS): its
// async publishes fail after ackTimeout (DefaultAckTimeout in controld)
// rather than wait for ever for an ack. A publish whose ack was lost with
// a stream leader is otherwise never released, and once 4000 are, every
// publish stalls and fails.
func NewJetStream(nc *nats.Conn, ackTimeout time.Duration) (jetstream.JetStream, error) {
	js, err := jetstream.New(nc, jetstream.WithPublishAsyncTimeout(ackTimeout))
	if err != nil {
		return nil, fmt.Errorf("jetstream: %w", err)
	}
	return js, nil
}

// RelayConfig configures a Relay.
type RelayConfig struct {
	Pool *pgxpool.Pool
	JS   jetstream.JetStream
	// BatchSize rows are claimed per transaction (default 256).
	BatchSize int
	// PollInterval is the fallback when no NOTIFY arrives (default 1s).
	PollInterval time.Duration
	// MaxAttempts before a row is moved to dead (default 20).
	MaxAttempts int
	// AckTimeout bounds the wait for JetStream's acks of one batch
	// (default 10s); the rows still unacknowledged then are failed.
	AckTimeout time.Duration
	Now        func() time.Time
	Log        *slog.Logger
	// beforeMark, when set (tests), runs after the batch is published and
	// before rows are marked; an error aborts the batch as a crash would.
	beforeMark func(published []int64) error
}

// CheckAndSetDefaults validates c and fills defaults.
func (c *RelayConfig) CheckAndSetDefaults() error {
	if c.Pool == nil || c.JS == nil {
		return errors.New("outbox relay: Pool and JS are required")
	}
	if c.BatchSize == 0 {
		c.BatchSize = 256
	}
	if c.PollInterval == 0 {
		c.PollInterval = time.Second
	}
	if c.MaxAttempts == 0 {
		c.MaxAttempts = 20
	}
	if c.AckTimeout == 0 {
		c.AckTimeout = DefaultAckTimeout
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.Log == nil {
		c.Log = slog.New(slog.DiscardHandler)
	}
	return nil
}

// Relay publishes committed outbox rows to the EVENTS stream.
type Relay struct{ cfg RelayConfig }

// NewRelay returns a Relay.
func NewRelay(cfg RelayConfig) (*Relay, error) {
	if err := cfg.CheckAndSetDefaults(); err != nil {
		return nil, err
	}
	return &Relay{cfg: cfg}, nil
}

// EnsureStream creates or updates the EVENTS stream with replicas copies
// (1 on a single server; 3 on a cluster of three for JetStream R3), at most
// maxBytes and maxAge old: the oldest events go first.
func EnsureStream(ctx context.Context, js jetstream.JetStream, replicas int, maxBytes int64, maxAge time.Duration) error {
	_, err := js.CreateOrUpdateStream(ctx, jetstream.StreamConfig{
		Name:       api.EventStreamName,
		Replicas:   replicas,
		Subjects:   []string{api.EventSubjectPrefix + ".>"},
		Storage:    jetstream.FileStorage,
		Duplicates: DuplicateWindow,
		MaxAge:     maxAge,
		MaxBytes:   maxBytes,
		Discard:    jetstream.DiscardOld,
	})
	if err != nil {
		return fmt.Errorf("ensure %s stream: %w", api.EventStreamName, err)
	}
	return nil
}

// Run publishes batches as rows commit (LISTEN/NOTIFY, with polling as
// the fallback) until ctx ends. One relay is active across replicas:
// controld runs it under the outbox relay's lease (controld/lease), whose
// loss ends ctx, and each batch's marks commit only while that lease is
// still held (lease.Fence), so a relay that lost its lease — cut off,
// paused — cannot mark a batch it published late; JetStream drops the
// duplicates of its publishes by their Nats-Msg-Id.
func (r *Relay) Run(ctx context.Context) error {
	conn, err := r.cfg.Pool.Acquire(ctx)
	if err != nil {
		return ctxErr(ctx, fmt.Errorf("relay: %w", err))
	}
	// LISTEN lives in this session; closing it (rather than returning it
	// to the pool) ends it.
	defer func() { _ = conn.Hijack().Close(context.WithoutCancel(ctx)) }()
	if _, err := conn.Exec(ctx, `LISTEN outbox_events`); err != nil {
		return ctxErr(ctx, fmt.Errorf("relay listen: %w", err))
	}
	r.cfg.Log.Info("outbox relay active")
	for {
		for {
			n, err := r.RunOnce(ctx)
			if err != nil {
				if ctx.Err() != nil {
					return nil
				}
				r.cfg.Log.Warn("outbox batch", "err", err)
				break
			}
			if n < r.cfg.BatchSize {
				break
			}
		}
		wctx, cancel := context.WithTimeout(ctx, r.cfg.PollInterval)
		_, err := conn.Conn().WaitForNotification(wctx)
		cancel()
		if ctx.Err() != nil {
			return nil
		}
		if err != nil && !errors.Is(err, context.DeadlineExceeded) {
			return fmt.Errorf("relay wait: %w", err)
		}
	}
}

func ctxErr(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return nil
	}
	return err
}

type row struct {
	ev       api.Event
	attempts int
}

// RunOnce claims one batch of due rows, publishes them and marks the ones
// JetStream acknowledged. It returns how many rows it claimed.
//
// A subject's events (an allocation's, say) reach the stream in the order
// of their ids: a row is not claimed while an earlier row of its subject
// is backing off after a failure, and within a batch a subject's rows are
// published one after the other (publish). The claim waits for rows
// another relay holds rather than skipping them: only one relay is
// active, but one that lost its lock may still be finishing a batch.
func (r *Relay) RunOnce(ctx context.Context) (int, error) {
	claimed := 0
	err := pgx.BeginFunc(ctx, r.cfg.Pool, func(tx pgx.Tx) error {
		// A relay that stops mid-batch (paused, cut off) must not keep the
		// rows it claimed locked for as long as its session lives: the
		// server ends the transaction once it idles past the acks' wait.
		if _, err := tx.Exec(ctx, fmt.Sprintf(`SET LOCAL idle_in_transaction_session_timeout = %d`,
			(r.cfg.AckTimeout+idleInBatchMargin).Milliseconds())); err != nil {
			return fmt.Errorf("claim outbox rows: %w", err)
		}
		rows, err := tx.Query(ctx, `SELECT id, kind, subject, coalesce(project_id, ''), users,
				CASE WHEN jsonb_typeof(payload) = 'object' THEN payload - '`+corrPayload+`' ELSE payload END,
				coalesce(payload->>'`+corrPayload+`', ''), created_at, attempts
			FROM outbox_events o WHERE state = 'pending' AND next_attempt_at <= $1
			  AND NOT EXISTS (SELECT 1 FROM outbox_events e WHERE e.state = 'pending' AND e.subject = o.subject
			      AND e.id < o.id AND e.next_attempt_at > $1)
			ORDER BY id LIMIT $2 FOR UPDATE`, r.cfg.Now(), r.cfg.BatchSize)
		if err != nil {
			return fmt.Errorf("claim outbox rows: %w", err)
		}
		batch, err := pgx.CollectRows(rows, func(cr pgx.CollectableRow) (row, error) {
			var rw row
			var payload []byte
			err := cr.Scan(&rw.ev.ID, &rw.ev.Kind, &rw.ev.Subject, &rw.ev.ProjectID, &rw.ev.Users, &payload, &rw.ev.Corr,
				&rw.ev.At, &rw.attempts)
			rw.ev.Data = payload
			return rw, err
		})
		if err != nil {
			return fmt.Errorf("claim outbox rows: %w", err)
		}
		claimed = len(batch)
		if claimed == 0 {
			return nil
		}
		ok, failed := r.publish(ctx, batch)
		if r.cfg.beforeMark != nil {
			if err := r.cfg.beforeMark(ok); err != nil {
				return err
			}
		}
		if err := r.mark(ctx, tx, ok, failed); err != nil {
			return err
		}
		return lease.Fence(ctx, tx)
	})
	return claimed, err
}

// publish sends the batch and waits for the acks, in waves: each wave
// sends the next row of every subject asynchronously, so different
// subjects go out together while a subject's rows go one after the other.
// After a failure the subject's later rows are left for the next batch
// (neither ok nor failed): none may overtake the row that failed.
func (r *Relay) publish(ctx context.Context, batch []row) (ok []int64, failed map[int64]failure) {
	failed = map[int64]failure{}
	var subjects []string
	chains := map[string][]int{} // subject → indexes into batch, in id order
	for i, rw := range batch {
		if _, seen := chains[rw.ev.Subject]; !seen {
			subjects = append(subjects, rw.ev.Subject)
		}
		chains[rw.ev.Subject] = append(chains[rw.ev.Subject], i)
	}
	stopped := map[string]bool{}
	// A context, not a time.After: its Done stays closed for every row
	// still waiting, where a timer's one value went to the first of them
	// only and the others waited for ever for acks that a lost stream
	// leader never sent, and the relay with them.
	ackCtx, cancel := context.WithTimeout(ctx, r.cfg.AckTimeout)
	defer cancel()
	for wave := 0; ; wave++ {
		type sent struct {
			subject string
			i       int
			f       jetstream.PubAckFuture
		}
		var inflight []sent
		for _, subj := range subjects {
			if stopped[subj] || wave >= len(chains[subj]) {
				continue
			}
			i := chains[subj][wave]
			rw := batch[i]
			body, _ := json.Marshal(rw.ev) // plain struct with RawMessage from jsonb: always valid
			msg := &nats.Msg{Subject: api.EventSubject(rw.ev.Kind), Data: body, Header: nats.Header{}}
			msg.Header.Set(jetstream.MsgIDHeader, strconv.FormatInt(rw.ev.ID, 10))
			f, err := r.cfg.JS.PublishMsgAsync(msg)
			if err != nil {
				failed[rw.ev.ID] = failure{rw.attempts, err}
				stopped[subj] = true
				continue
			}
			inflight = append(inflight, sent{subj, i, f})
		}
		if len(inflight) == 0 {
			return ok, failed
		}
		for _, s := range inflight {
			rw := batch[s.i]
			var err error
			select {
			case <-s.f.Ok():
				ok = append(ok, rw.ev.ID)
				continue
			case err = <-s.f.Err():
			case <-ackCtx.Done():
				if err = ctx.Err(); err == nil {
					err = fmt.Errorf("no ack from JetStream in %s", r.cfg.AckTimeout)
				}
			}
			failed[rw.ev.ID] = failure{rw.attempts, err}
			stopped[s.subject] = true
		}
	}
}

type failure struct {
	attempts int
	err      error
}

func (r *Relay) mark(ctx context.Context, tx pgx.Tx, ok []int64, failed map[int64]failure) error {
	now := r.cfg.Now()
	if len(ok) > 0 {
		if _, err := tx.Exec(ctx, `UPDATE outbox_events SET state = 'published', published_at = $2,
			attempts = attempts + 1 WHERE id = ANY($1)`, ok, now); err != nil {
			return fmt.Errorf("mark published: %w", err)
		}
	}
	for id, f := range failed {
		attempts := f.attempts + 1
		state := "pending"
		if attempts >= r.cfg.MaxAttempts {
			state = "dead"
			r.cfg.Log.Error("outbox event dead", "id", id, "err", f.err)
		}
		backoff := min(time.Duration(1<<min(attempts, 10))*100*time.Millisecond, time.Minute)
		if _, err := tx.Exec(ctx, `UPDATE outbox_events SET state = $2, attempts = $3, last_error = $4,
			next_attempt_at = $5 WHERE id = $1`, id, state, attempts, f.err.Error(), now.Add(backoff)); err != nil {
			return fmt.Errorf("mark failed: %w", err)
		}
	}
	return nil
}
