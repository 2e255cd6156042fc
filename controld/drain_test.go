package controld_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/gpuaas/gpuaas/controld/controldtest"
	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/testutil"
)

// TestSIGTERMAnswersRequestsAlreadyReceived: requests controld received
// before SIGTERM are answered, also those still queued behind the busy
// handlers of their endpoint. 32 releases of one allocation wait on its
// row, locked by the test: up to 8 are in handlers (the endpoint's
// lanes), the others queued in its subscriptions. controld is stopped, then the row is
// unlocked. Before the drain, Run waited for the handlers in flight only
// and returned with the queued requests unanswered: they timed out.
func TestSIGTERMAnswersRequestsAlreadyReceived(t *testing.T) {
	t.Parallel()
	log, logs := testutil.CaptureLog(t)
	env := controldtest.Start(t, controldtest.Options{Log: log})
	ctx := context.Background()
	client := api.NewClient(env.UserConn(t, env.Admin.ID, env.AdminToken), api.WithToken(env.AdminToken),
		api.WithProject(env.Project.Name), api.WithTimeout(90*time.Second),
		// One attempt waits for its reply: the test is about replies, not
		// the client's retries (under -race a queued release waits > 4 s).
		api.WithAttemptTimeout(90*time.Second))
	al, err := client.AllocCreate(ctx, api.AllocCreateRequest{SKU: "h200-slice", GPUs: 1})
	if err != nil {
		t.Fatal(err)
	}
	db, err := pgx.Connect(ctx, env.DSN)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close(ctx)
	tx, err := db.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	if _, err := tx.Exec(ctx, `SELECT 1 FROM allocations WHERE id = $1 FOR UPDATE`, al.ID); err != nil {
		t.Fatal(err)
	}
	const n = 32
	errs := make(chan error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			_, err := client.AllocRelease(ctx, api.AllocReleaseRequest{ID: al.ID},
				api.WithIdempotencyKey(fmt.Sprintf("drain-release-%d", i)))
			errs <- err
		})
	}
	// The endpoint's lanes take one request at a time: once a handler
	// waits on the row, the requests behind it wait in the subscriptions.
	// (The client's timeout is longer than any wait here: a request must
	// not time out before the stop.)
	testutil.Eventually(t, "a handler to wait on the row", func() bool {
		var waiting int
		err := db.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock'
			AND datname = current_database()`).Scan(&waiting)
		if err == nil && waiting >= 1 {
			return true
		}
		select {
		case err := <-errs:
			t.Fatalf("a release returned before the row was unlocked: %v", err)
		default:
		}
		return false
	})
	stopped := make(chan error, 1)
	go func() { stopped <- env.Stop() }()
	// The singletons stop first thing: then controld is draining.
	testutil.Eventually(t, "controld to start its drain", func() bool {
		return len(logs.Lines("drain: singletons released")) > 0
	})
	if err := tx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	close(errs)
	answered, unanswered, notReceived := 0, 0, 0
	for err := range errs {
		switch {
		case errors.Is(err, api.ErrTimedOut):
			unanswered++
		case errors.Is(err, api.ErrNoResponders):
			notReceived++ // sent after the drain began: the client retries
		case err != nil && !errors.Is(err, api.ErrConflict):
			t.Errorf("release: %v", err)
		default:
			answered++
		}
	}
	if unanswered > 0 {
		t.Errorf("%d of %d requests received before SIGTERM got no reply", unanswered, n)
	}
	select {
	case err := <-stopped:
		if err != nil {
			t.Errorf("controld run: %v", err)
		}
	case <-time.After(time.Minute):
		t.Fatal("controld did not stop")
	}
	t.Logf("requests answered %d of %d, unanswered %d, sent after the stop %d", answered, n, unanswered, notReceived)
}
