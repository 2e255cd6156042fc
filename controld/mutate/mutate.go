// Package mutate runs every controld mutation the same way: one
// transaction holding the effect, its audit row, its outbox row and its
// idempotency record (docs/architecture.md, "The data path of a request"). It owns idempotency_keys.
package mutate

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"time"
	"unicode"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/gpuaas/gpuaas/controld/audit"
	"github.com/gpuaas/gpuaas/controld/outbox"
	"github.com/gpuaas/gpuaas/controld/store"
	"github.com/gpuaas/gpuaas/internal/api"
)

// MaxKeyLength bounds an Idempotency-Key.
const MaxKeyLength = 200

// Request describes one mutating call.
type Request struct {
	Endpoint      string
	ActorID       string // who is acting: the user id, or "anonymous:<email>" for logins
	Key           string // Idempotency-Key
	CorrelationID string
	// Fingerprint is everything that makes two requests "the same" (the
	// body and the headers that change meaning, such as the project).
	Fingerprint []byte
	// NoReplay skips storing the response (login and exchange: a session
	// token must not be kept in the idempotency table). The key is still
	// required and still guards against concurrent duplicates.
	NoReplay bool
}

// Effect is what a mutation records besides its own rows.
type Effect struct {
	// Audit is the mutation's audit row; its Action is required.
	Audit audit.Entry
	// Events are enqueued in the same transaction. A mutation normally has
	// exactly one.
	Events []outbox.Event
	// Final, when set, queues the mutation's last checks in the round
	// trip that writes its audit, outbox and idempotency rows, ahead of
	// them, and returns what to decide once that round trip is back (nil:
	// nothing more); an error from either rolls the whole mutation back.
	// A lock taken there is held only until the COMMIT that follows
	// (alloc.Create's funds lock, docs/decisions/0042-funds-lock-last.md).
	// When Final returns a nil check, that COMMIT is sent in the same
	// round trip, after the idempotency record
	// (docs/decisions/0067-create-lock-order.md).
	// It comes before the audit row because the audit chain's lock on the
	// project's stream (migration 0023) is every mutation's last lock.
	Final func(b *pgx.Batch) (check func(ctx context.Context, tx pgx.Tx) error)
}

// Func performs the change inside tx and returns the response body.
type Func func(ctx context.Context, tx pgx.Tx) (resp any, eff Effect, err error)

// ErrStale is what a Func (or its Final) wraps when something it read in
// its transaction changed before the commit, in a way the final round
// trip's guard saw: Run rolls back and runs the Func again in a new
// transaction, which reads the change. A Func that can return it must be
// safe to run again (its effect is in tx alone).
var ErrStale = errors.New("what the mutation read changed before its commit")

// maxRuns bounds how often Run runs a Func that keeps finding ErrStale.
const maxRuns = 3

// Runner runs mutations against one database.
type Runner struct {
	Pool *pgxpool.Pool
	Now  func() time.Time
	// Log hears of a check in this process that failed on a final round
	// trip the server had already committed (nil: nowhere).
	Log *slog.Logger
}

// ValidateKey checks an Idempotency-Key at the edge.
func ValidateKey(endpoint, key string) error {
	if key == "" {
		return api.Errorf(api.CodeInvalidArgument, "%s needs an Idempotency-Key header", endpoint).
			WithHint("the gpuaas client sets one on every mutation; scripts calling NATS directly must send one")
	}
	if len(key) > MaxKeyLength {
		return api.Errorf(api.CodeInvalidArgument, "Idempotency-Key is longer than %d characters", MaxKeyLength)
	}
	for _, r := range key {
		if r > unicode.MaxASCII || !unicode.IsPrint(r) {
			return api.Errorf(api.CodeInvalidArgument, "Idempotency-Key must be printable ASCII")
		}
	}
	return nil
}

// Run executes fn under the idempotency rules:
//   - same actor and key, same fingerprint: the stored response is replayed
//     and fn does not run;
//   - same actor and key, another fingerprint: idempotency_mismatch;
//   - same actor and key while the first is still running: conflict.
//
// On success the effect, one audit row, the outbox rows and the
// idempotency record commit together. On error nothing is written, so the
// same key may be retried. An effect without an audit action is an error
// (ErrNoAuditAction): nothing commits. A run that ends in ErrStale is
// rolled back and fn runs again, up to maxRuns times (then conflict).
func (r *Runner) Run(ctx context.Context, req Request, fn Func) ([]byte, error) {
	if err := ValidateKey(req.Endpoint, req.Key); err != nil {
		return nil, err
	}
	hash := sha256.Sum256(append([]byte(req.Endpoint+"\n"), req.Fingerprint...))
	if req.NoReplay {
		// The fingerprint of a login holds the password (or ID token): an
		// unsalted SHA-256 of it must not be stored. Such requests are
		// never replayed, so the endpoint alone tells repeats apart.
		hash = sha256.Sum256([]byte(req.Endpoint + "\n"))
	}
	conn, err := r.Pool.Acquire(ctx)
	if err != nil {
		return nil, err
	}
	// Released idle once committed or rolled back (a COMMIT sent in the
	// final round trip leaves the connection idle as well).
	defer conn.Release()
	for runs := 1; ; runs++ {
		out, err := r.runOnce(ctx, conn, req, hash[:], fn)
		if !errors.Is(err, ErrStale) {
			return out, err
		}
		if runs == maxRuns {
			return nil, api.Errorf(api.CodeConflict, "%s: what it read kept changing while it ran (%d runs)", req.Endpoint, runs).
				WithHint("retry it")
		}
	}
}

// runOnce is one run of fn in a transaction of its own on conn.
func (r *Runner) runOnce(ctx context.Context, conn *pgxpool.Conn, req Request, hash []byte, fn Func) ([]byte, error) {
	tx, err := conn.Begin(ctx)
	if err != nil {
		return nil, err
	}
	out, committed, err := r.run(ctx, tx, req, hash, fn)
	if err != nil {
		_ = tx.Rollback(ctx) // the error said what went wrong; nothing committed
		return nil, err
	}
	if !committed {
		if err := tx.Commit(ctx); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// run is Run's work inside tx; committed says the COMMIT went in the
// final round trip (see Effect.Final).
func (r *Runner) run(ctx context.Context, tx pgx.Tx, req Request, hash []byte, fn Func) (out []byte, committed bool, err error) {
	stored, found, err := lockAndLookup(ctx, tx, req, hash)
	if err != nil || found {
		return stored, false, err
	}
	resp, eff, err := fn(ctx, tx)
	if err != nil {
		return nil, false, err
	}
	if out, err = json.Marshal(resp); err != nil {
		return nil, false, fmt.Errorf("encode %s response: %w", req.Endpoint, err)
	}
	committed, err = r.record(ctx, tx, req, hash, out, eff)
	return out, committed, err
}

// lockAndLookup takes the key's lock and reads its record in one round
// trip: the lookup runs after the lock in the same pipeline, and its
// result is used only when the lock was taken.
func lockAndLookup(ctx context.Context, tx pgx.Tx, req Request, hash []byte) ([]byte, bool, error) {
	b := &pgx.Batch{}
	b.Queue(`SELECT pg_try_advisory_xact_lock(hashtextextended($1, 42))`, req.ActorID+"\n"+req.Key)
	// response holds the exact bytes as a JSON string (see record); #>>
	// unwraps it, and yields NULL for the JSON null of NoReplay rows.
	b.Queue(`SELECT endpoint, request_hash, response #>> '{}' FROM idempotency_keys
		WHERE actor = $1 AND key = $2`, req.ActorID, req.Key)
	br := tx.SendBatch(ctx, b)
	defer br.Close()
	var locked bool
	if err := br.QueryRow().Scan(&locked); err != nil {
		return nil, false, fmt.Errorf("lock idempotency key: %w", err)
	}
	if !locked {
		e := api.Errorf(api.CodeConflict, "a request with this Idempotency-Key is still in progress").
			WithHint("wait for it to finish, then retry with the same key to get its result")
		e.InProgress = true // the client retries it (api.Client)
		return nil, false, e
	}
	var endpoint string
	var storedHash, resp []byte
	err := br.QueryRow().Scan(&endpoint, &storedHash, &resp)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, false, br.Close()
	}
	if err != nil {
		return nil, false, fmt.Errorf("look up idempotency key: %w", err)
	}
	if err := br.Close(); err != nil {
		return nil, false, fmt.Errorf("look up idempotency key: %w", err)
	}
	if endpoint != req.Endpoint || !bytes.Equal(storedHash, hash) {
		return nil, false, api.Errorf(api.CodeIdempotencyMismatch,
			"Idempotency-Key %q was already used for a different request (%s)", req.Key, endpoint).
			WithHint("use a new key for a new request")
	}
	if resp == nil || string(resp) == "null" {
		return nil, false, api.Errorf(api.CodeConflict, "this request already succeeded; its response is not replayable").
			WithHint("use a new Idempotency-Key")
	}
	return resp, true, nil
}

func (r *Runner) record(ctx context.Context, tx pgx.Tx, req Request, hash, resp []byte, eff Effect) (committed bool, err error) {
	if eff.Audit.Action == "" {
		return false, fmt.Errorf("record %s: %w", req.Endpoint, ErrNoAuditAction)
	}
	now := r.Now()
	meta := audit.Meta{At: now, ActorID: req.ActorID, CorrelationID: req.CorrelationID, IdempotencyKey: req.Key}
	// The audit row, the outbox rows and the idempotency record go in one
	// round trip, in this order (the order of the single statements
	// before); each owner package queues its own statement.
	b := &pgx.Batch{}
	var check func(ctx context.Context, tx pgx.Tx) error
	if eff.Final != nil {
		check = eff.Final(b)
	}
	if err := audit.QueueWrite(b, meta, eff.Audit); err != nil {
		return false, err
	}
	for _, ev := range eff.Events {
		if err := outbox.QueueEnqueue(ctx, b, now, ev); err != nil {
			return false, err
		}
	}
	// The response is stored as a JSON string holding its exact bytes: a
	// jsonb object would come back with its keys reordered and spaces
	// added, and a replay must be byte for byte the original reply.
	var stored *string // nil is stored as JSON null
	if !req.NoReplay {
		text := string(resp)
		stored = &text
	}
	b.Queue(`INSERT INTO idempotency_keys (actor, key, endpoint, request_hash, response, created_at)
		VALUES ($1,$2,$3,$4,coalesce(to_jsonb($5::text), 'null'),$6)`, req.ActorID, req.Key, req.Endpoint, hash, stored, now).Fn =
		func(br pgx.BatchResults) error {
			if _, err := br.Exec(); err != nil {
				return fmt.Errorf("record idempotency key: %w", err)
			}
			return nil
		}
	// A Final that leaves nothing to decide after the round trip lets
	// the COMMIT go in it: a lock Final took is then released without a
	// round trip to this process in between. A statement failing before
	// it skips it (the server skips the rest of a pipeline after an
	// error) and Run rolls back.
	if eff.Final != nil && check == nil {
		committed, err := store.CommitInBatch(ctx, tx, b, req.Endpoint)
		if err != nil && committed {
			// What was written stands: the reply is the response
			// recorded with it, never an error a retry without a key
			// would repeat.
			if r.Log != nil {
				r.Log.Error("a check failed after its mutation committed", "endpoint", req.Endpoint, "err", err)
			}
			return true, nil
		}
		return committed, err
	}
	if err := tx.SendBatch(ctx, b).Close(); err != nil || check == nil {
		return false, err
	}
	return false, check(ctx, tx)
}

// Prune deletes the idempotency records of mutations made before cutoff:
// their responses are no longer replayed, and their keys may be used
// again.
func Prune(ctx context.Context, q store.Querier, cutoff time.Time) error {
	if _, err := q.Exec(ctx, `DELETE FROM idempotency_keys WHERE created_at < $1`, cutoff); err != nil {
		return fmt.Errorf("prune idempotency keys: %w", err)
	}
	return nil
}
