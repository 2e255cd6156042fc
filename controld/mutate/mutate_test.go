package mutate_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/gpuaas/gpuaas/controld/audit"
	"github.com/gpuaas/gpuaas/controld/mutate"
	"github.com/gpuaas/gpuaas/controld/outbox"
	"github.com/gpuaas/gpuaas/controld/store"
	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/testutil"
)

func TestMain(m *testing.M) { os.Exit(testutil.Main(m)) }

var pgTemplate = testutil.NewTemplate("mutate", store.Migrate)

func newRunner(t *testing.T) (*mutate.Runner, *pgxpool.Pool) {
	t.Helper()
	pool, err := store.Open(context.Background(), testutil.Postgres(t, pgTemplate), 8)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return &mutate.Runner{Pool: pool, Now: time.Now}, pool
}

// rows counts what a mutation leaves behind.
type rows struct{ audit, outbox, keys int }

func countRows(t *testing.T, pool *pgxpool.Pool) rows {
	t.Helper()
	var r rows
	if err := pool.QueryRow(context.Background(), `SELECT
		(SELECT count(*) FROM audit_logs), (SELECT count(*) FROM outbox_events), (SELECT count(*) FROM idempotency_keys)`).
		Scan(&r.audit, &r.outbox, &r.keys); err != nil {
		t.Fatal(err)
	}
	return r
}

// reply has what jsonb would disturb: fields out of alphabetical order,
// escaped HTML, non-ASCII text and an integer beyond float64 precision.
type reply struct {
	Zeta  string `json:"zeta"`
	Alpha int64  `json:"alpha"`
	HTML  string `json:"html"`
	Text  string `json:"text"`
	Empty []int  `json:"empty"`
}

func effect(id string) mutate.Effect {
	return mutate.Effect{
		Audit:  audit.Entry{Action: "test.do", TargetType: "thing", TargetID: id},
		Events: []outbox.Event{{Kind: "test.done", Subject: id}},
	}
}

func TestRunReplaysTheStoredResponseByteForByte(t *testing.T) {
	t.Parallel()
	r, pool := newRunner(t)
	ctx := t.Context()
	var runs atomic.Int32
	fn := func(ctx context.Context, tx pgx.Tx) (any, mutate.Effect, error) {
		runs.Add(1)
		return reply{Zeta: "z", Alpha: 9007199254740993, HTML: "<a&b>", Text: "Grüße, 世界", Empty: []int{}}, effect("x"), nil
	}
	req := mutate.Request{Endpoint: "test.do", ActorID: "u-1", Key: "k1", Fingerprint: []byte(`{"n":1}`)}
	first, err := r.Run(ctx, req, fn)
	if err != nil {
		t.Fatal(err)
	}
	if got := countRows(t, pool); got != (rows{1, 1, 1}) {
		t.Fatalf("after one run got %+v; want one audit row, one event, one key", got)
	}
	second, err := r.Run(ctx, req, fn)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(second, first) {
		t.Fatalf("replay got %s; want %s", second, first)
	}
	if got := runs.Load(); got != 1 {
		t.Fatalf("fn ran %d times; want 1", got)
	}
	if got := countRows(t, pool); got != (rows{1, 1, 1}) {
		t.Fatalf("after the replay got %+v; want it unchanged", got)
	}
}

func TestRunRefusesAKeyReusedForAnotherRequest(t *testing.T) {
	t.Parallel()
	r, pool := newRunner(t)
	ctx := t.Context()
	ok := func(ctx context.Context, tx pgx.Tx) (any, mutate.Effect, error) { return "ok", effect("x"), nil }
	req := mutate.Request{Endpoint: "test.do", ActorID: "u-1", Key: "k1", Fingerprint: []byte(`{"n":1}`)}
	if _, err := r.Run(ctx, req, ok); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		req  mutate.Request
		want error
	}{
		{"other fingerprint", mutate.Request{Endpoint: "test.do", ActorID: "u-1", Key: "k1", Fingerprint: []byte(`{"n":2}`)}, api.ErrIdempotencyMismatch},
		{"other endpoint", mutate.Request{Endpoint: "test.other", ActorID: "u-1", Key: "k1", Fingerprint: []byte(`{"n":1}`)}, api.ErrIdempotencyMismatch},
		{"no key", mutate.Request{Endpoint: "test.do", ActorID: "u-1", Fingerprint: []byte(`{"n":1}`)}, api.ErrInvalidArgument},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := r.Run(ctx, tt.req, ok); !errors.Is(err, tt.want) {
				t.Fatalf("got %v; want %v", err, tt.want)
			}
		})
	}
	if got := countRows(t, pool); got != (rows{1, 1, 1}) {
		t.Fatalf("refused requests left %+v; want only the first request's rows", got)
	}
}

func TestRunFailureStoresNothing(t *testing.T) {
	t.Parallel()
	r, pool := newRunner(t)
	ctx := t.Context()
	req := mutate.Request{Endpoint: "test.do", ActorID: "u-1", Key: "k1", Fingerprint: []byte(`{}`)}
	_, err := r.Run(ctx, req, func(ctx context.Context, tx pgx.Tx) (any, mutate.Effect, error) {
		// A partial effect that must roll back with the failure.
		if err := audit.Write(ctx, tx, audit.Meta{At: time.Now(), ActorID: "u-1"}, audit.Entry{Action: "half"}); err != nil {
			return nil, mutate.Effect{}, err
		}
		return nil, mutate.Effect{}, api.Errorf(api.CodeNoCapacity, "full")
	})
	if !errors.Is(err, api.ErrNoCapacity) {
		t.Fatalf("got %v; want no_capacity", err)
	}
	if got := countRows(t, pool); got != (rows{}) {
		t.Fatalf("failed run left %+v; want nothing", got)
	}
	out, err := r.Run(ctx, req, func(ctx context.Context, tx pgx.Tx) (any, mutate.Effect, error) {
		return "second try", effect("x"), nil
	})
	if err != nil || string(out) != `"second try"` {
		t.Fatalf("retry with the same key got %s, %v; want \"second try\"", out, err)
	}
}

func TestRunRefusesAMutationWithoutAuditAction(t *testing.T) {
	t.Parallel()
	r, pool := newRunner(t)
	ctx := t.Context()
	req := mutate.Request{Endpoint: "test.do", ActorID: "u-1", Key: "k1", Fingerprint: []byte(`{}`)}
	noAction := effect("x")
	noAction.Audit.Action = ""
	var changed bool
	_, err := r.Run(ctx, req, func(ctx context.Context, tx pgx.Tx) (any, mutate.Effect, error) {
		// The effect itself, which must roll back with the refusal.
		if _, err := outbox.Enqueue(ctx, tx, time.Now(), outbox.Event{Kind: "test.half", Subject: "x"}); err != nil {
			return nil, mutate.Effect{}, err
		}
		changed = true
		return "done", noAction, nil
	})
	if !errors.Is(err, mutate.ErrNoAuditAction) {
		t.Fatalf("got %v; want ErrNoAuditAction", err)
	}
	if api.CodeOf(err) != api.CodeInternal {
		t.Errorf("code got %s; want internal", api.CodeOf(err))
	}
	if !changed {
		t.Fatal("fn did not run")
	}
	if got := countRows(t, pool); got != (rows{}) {
		t.Fatalf("refused mutation left %+v; want nothing committed", got)
	}
	// The key is free: the mutation, fixed, goes through.
	if _, err := r.Run(ctx, req, func(ctx context.Context, tx pgx.Tx) (any, mutate.Effect, error) {
		return "done", effect("x"), nil
	}); err != nil {
		t.Fatalf("retry with an audit action got %v; want success", err)
	}
}

func TestRunConcurrentDuplicateConflicts(t *testing.T) {
	t.Parallel()
	r, pool := newRunner(t)
	ctx := t.Context()
	req := mutate.Request{Endpoint: "test.do", ActorID: "u-1", Key: "k1", Fingerprint: []byte(`{}`)}
	started, release := make(chan struct{}), make(chan struct{})
	firstDone := make(chan error, 1)
	releaseFirst := sync.OnceFunc(func() { close(release) })
	defer releaseFirst() // so that a failing test does not leave the first run holding a connection
	go func() {
		_, err := r.Run(ctx, req, func(ctx context.Context, tx pgx.Tx) (any, mutate.Effect, error) {
			close(started)
			<-release
			return "first", effect("x"), nil
		})
		firstDone <- err
	}()
	<-started
	_, err := r.Run(ctx, req, func(ctx context.Context, tx pgx.Tx) (any, mutate.Effect, error) {
		return "second", effect("y"), nil
	})
	if !errors.Is(err, api.ErrConflict) {
		t.Fatalf("duplicate while the first runs got %v; want conflict", err)
	}
	// Another actor's identical key is independent.
	other := req
	other.ActorID = "u-2"
	if _, err := r.Run(ctx, other, func(ctx context.Context, tx pgx.Tx) (any, mutate.Effect, error) {
		return "other actor", effect("z"), nil
	}); err != nil {
		t.Fatalf("same key, other actor got %v; want success", err)
	}
	releaseFirst()
	if err := <-firstDone; err != nil {
		t.Fatal(err)
	}
	out, err := r.Run(ctx, req, func(ctx context.Context, tx pgx.Tx) (any, mutate.Effect, error) {
		t.Error("fn ran for a replay")
		return nil, mutate.Effect{}, nil
	})
	if err != nil || string(out) != `"first"` {
		t.Fatalf("after the first finished got %s, %v; want the replayed \"first\"", out, err)
	}
	if got := countRows(t, pool); got != (rows{2, 2, 2}) {
		t.Fatalf("got %+v; want the rows of two mutations", got)
	}
}

func TestRunNoReplay(t *testing.T) {
	t.Parallel()
	r, pool := newRunner(t)
	ctx := t.Context()
	const body = `{"email":"a@example.test","password":"hunter2 hunter2"}`
	req := mutate.Request{Endpoint: "auth.login", ActorID: "anonymous:a@example.test", Key: "k1",
		Fingerprint: []byte(body), NoReplay: true}
	login := func(ctx context.Context, tx pgx.Tx) (any, mutate.Effect, error) {
		return map[string]string{"token": "secret-session-token"}, effect("s-1"), nil
	}
	out, err := r.Run(ctx, req, login)
	if err != nil || !bytes.Contains(out, []byte("secret-session-token")) {
		t.Fatalf("login got %s, %v; want the token", out, err)
	}
	var stored string
	var hash []byte
	if err := pool.QueryRow(ctx, `SELECT response::text, request_hash FROM idempotency_keys WHERE key = 'k1'`).
		Scan(&stored, &hash); err != nil {
		t.Fatal(err)
	}
	if stored != "null" {
		t.Fatalf("stored response got %s; want null (no session token kept)", stored)
	}
	if digest := sha256.Sum256([]byte("auth.login\n" + body)); bytes.Equal(hash, digest[:]) {
		t.Fatal("idempotency_keys holds an unsalted SHA-256 of the request body, password included")
	}
	for _, retry := range []string{body, `{"email":"a@example.test","password":"another one"}`} {
		req.Fingerprint = []byte(retry)
		if _, err := r.Run(ctx, req, login); !errors.Is(err, api.ErrConflict) {
			t.Fatalf("retrying a login with the same key got %v; want conflict (not replayable)", err)
		}
	}
	if got := countRows(t, pool); got != (rows{1, 1, 1}) {
		t.Fatalf("got %+v; want one login's rows", got)
	}
}

// TestRunRunsAStaleMutationAgain: a run whose final round trip finds that
// what it read changed (its guard fails on the server, skipping the
// COMMIT queued after it, and its callback says ErrStale) is rolled back
// and run again in a new transaction; what the stale run wrote is gone
// and the second run's reply and rows are what commit. A mutation that
// stays stale is refused with conflict after maxRuns runs, and leaves
// nothing.
func TestRunRunsAStaleMutationAgain(t *testing.T) {
	t.Parallel()
	r, pool := newRunner(t)
	ctx := t.Context()
	run := func(key string, staleRuns int) (int, []byte, error) {
		runs := 0
		out, err := r.Run(ctx, mutate.Request{Endpoint: "test.do", ActorID: "u-1", Key: key, Fingerprint: []byte(`{}`)},
			func(ctx context.Context, tx pgx.Tx) (any, mutate.Effect, error) {
				runs++
				if err := audit.Write(ctx, tx, audit.Meta{At: time.Now(), ActorID: "u-1"}, audit.Entry{Action: "half"}); err != nil {
					return nil, mutate.Effect{}, err
				}
				eff := effect(key)
				divisor := 1 // the guard passes
				if runs <= staleRuns {
					divisor = 0 // the guard fails on the server
				}
				eff.Final = func(b *pgx.Batch) func(context.Context, pgx.Tx) error {
					b.Queue(`SELECT 1 / $1::int`, divisor).Fn = func(br pgx.BatchResults) error {
						if _, err := br.Exec(); err != nil {
							return fmt.Errorf("guard: %v: %w", err, mutate.ErrStale)
						}
						return nil
					}
					return nil
				}
				return fmt.Sprintf("run %d", runs), eff, nil
			})
		return runs, out, err
	}
	runs, out, err := run("k-once", 1)
	if err != nil || runs != 2 || string(out) != `"run 2"` {
		t.Fatalf("stale once: %d runs, %s, %v; want 2 runs answering \"run 2\"", runs, out, err)
	}
	if got := countRows(t, pool); got != (rows{audit: 2, outbox: 1, keys: 1}) {
		t.Fatalf("stale once left %+v; want the second run's two audit rows, its event and its key", got)
	}
	runs, out, err = run("k-always", 100)
	if api.CodeOf(err) != api.CodeConflict || runs != 3 || out != nil {
		t.Fatalf("always stale: %d runs, %s, %v; want conflict after 3 runs", runs, out, err)
	}
	if got := countRows(t, pool); got != (rows{audit: 2, outbox: 1, keys: 1}) {
		t.Fatalf("always stale left %+v; want nothing more than before", got)
	}
}
