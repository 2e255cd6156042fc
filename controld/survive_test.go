package controld_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/gpuaas/gpuaas/controld"
	"github.com/gpuaas/gpuaas/controld/controldtest"
	"github.com/gpuaas/gpuaas/controld/tasks"
	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/testutil"
)

// lockedBuffer is a log destination read while the loop writes it.
type lockedBuffer struct {
	mu  sync.Mutex // protects buf
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// TestSuperviseLogsRecoveryWhileTheLoopRuns is the bug where a supervised
// loop that came back logged its recovery only when it failed again (so
// never, for a loop that then ran for good): an outage is one warning when
// it starts and one "recovered" line with its duration once the loop runs
// again, and a failure after that is a new outage.
func TestSuperviseLogsRecoveryWhileTheLoopRuns(t *testing.T) {
	t.Parallel()
	var out lockedBuffer
	log := slog.New(slog.NewTextHandler(&out, &slog.HandlerOptions{Level: slog.LevelInfo}))
	var runs atomic.Int32
	failAgain := make(chan struct{})
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() {
		done <- controld.Supervise(ctx, log, "test loop", func(ctx context.Context) error {
			switch runs.Add(1) {
			case 1, 2, 3: // Postgres is down
				return errors.New("connection refused")
			case 4: // back, until told to fail
				select {
				case <-failAgain:
					return errors.New("terminating connection due to administrator command")
				case <-ctx.Done():
					return nil
				}
			case 5:
				return nil // a loop that stops by itself is restarted too
			default:
				<-ctx.Done()
				return nil
			}
		})
	}()
	testutil.Eventually(t, "the recovery logged while the loop runs", func() bool {
		return strings.Contains(out.String(), "test loop recovered")
	})
	if got := strings.Count(out.String(), "test loop failed; restarting"); got != 1 {
		t.Fatalf("got %d outage lines for one outage of 3 failures; want 1:\n%s", got, out.String())
	}
	if !strings.Contains(out.String(), "outage=") {
		t.Fatalf("the recovery line has no outage duration:\n%s", out.String())
	}
	close(failAgain)
	testutil.Eventually(t, "a second outage and its recovery", func() bool {
		return runs.Load() >= 6 && strings.Count(out.String(), "test loop recovered") == 2
	})
	if got := strings.Count(out.String(), "test loop failed; restarting"); got != 2 {
		t.Fatalf("got %d outage lines after a second outage; want 2:\n%s", got, out.String())
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("supervise returned %v when its context ended; want nil", err)
	}
}

// TestFanoutSurvivesItsConsumerDeleted is the bug where the event fan-out
// (and the registry's revocations consumer) stopped for good when its JetStream consumer went away (a NATS restart
// without the consumer's state, an operator's mistake): jetstream's
// Consume stops on "consumer deleted" and Fanout kept waiting with nothing
// delivered. Now it is created again and users get their events.
func TestFanoutSurvivesItsConsumerDeleted(t *testing.T) {
	t.Parallel()
	env := controldtest.Start(t, controldtest.Options{NoNodes: true})
	js, err := jetstream.New(env.NC)
	if err != nil {
		t.Fatal(err)
	}
	stream, err := js.Stream(t.Context(), api.EventStreamName)
	if err != nil {
		t.Fatal(err)
	}
	// The fan-out's, and the NATS connection registry's (which closes
	// revoked sessions' connections) alike.
	for _, name := range []string{"user-fanout", "bus-revocations"} {
		testutil.Eventually(t, "the consumer "+name, func() bool {
			_, err := stream.Consumer(t.Context(), name)
			return err == nil
		})
		if err := stream.DeleteConsumer(t.Context(), name); err != nil {
			t.Fatal(err)
		}
		testutil.Eventually(t, "the consumer "+name+" created again", func() bool {
			_, err := stream.Consumer(t.Context(), name)
			return err == nil
		})
	}
	// And it delivers: the admin's own event reaches the admin.
	events, err := env.NC.SubscribeSync(api.UserEventSubject(env.Admin.ID, ">"))
	if err != nil {
		t.Fatal(err)
	}
	c := env.Client(env.AdminToken)
	if _, err := c.ProjectCreate(t.Context(), api.ProjectCreateRequest{Name: "after-the-deletion"}); err != nil {
		t.Fatal(err)
	}
	if _, err := events.NextMsg(testutil.EventuallyTimeout); err != nil {
		t.Fatalf("no event for the admin after the consumer was deleted: %v", err)
	}
}

// TestDispatcherListensAgainAfterItsConnectionEnds is the bug where the
// dispatcher's LISTEN connection, once ended by Postgres (a restart, an
// administrator's pg_terminate_backend), was never made again: tasks
// were then only found by polling. Now it listens again.
func TestDispatcherListensAgainAfterItsConnectionEnds(t *testing.T) {
	t.Parallel()
	env := controldtest.Start(t, controldtest.Options{NoNodes: true})
	conn, err := pgx.Connect(t.Context(), env.DSN)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close(context.Background()) })
	listener := func() (pid int32) {
		err := conn.QueryRow(t.Context(), `SELECT pid FROM pg_stat_activity
			WHERE datname = current_database() AND query = $1 AND pid <> pg_backend_pid()`, "LISTEN "+tasks.Channel).Scan(&pid)
		if err != nil && !errors.Is(err, pgx.ErrNoRows) {
			t.Fatal(err)
		}
		return pid
	}
	var first int32
	testutil.Eventually(t, "the dispatcher listening", func() bool { first = listener(); return first != 0 })
	if _, err := conn.Exec(t.Context(), `SELECT pg_terminate_backend($1)`, first); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, "the dispatcher listening on a new connection", func() bool {
		pid := listener()
		return pid != 0 && pid != first
	})
}
