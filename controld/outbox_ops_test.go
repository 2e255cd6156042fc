package controld_test

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/gpuaas/gpuaas/controld/controldtest"
	"github.com/gpuaas/gpuaas/controld/outbox"
	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/obs/obstest"
	"github.com/gpuaas/gpuaas/internal/testutil"
)

// deadEvent inserts an event row the relay already gave up on, as it
// leaves them (state dead, attempts spent, the last error kept).
func deadEvent(t *testing.T, env *controldtest.Env) int64 {
	t.Helper()
	var id int64
	if err := env.Server.Pool().QueryRow(context.Background(), `INSERT INTO outbox_events
		(kind, subject, created_at, state, attempts, last_error) VALUES ('test.dead', 'x', now(), 'dead', 20, 'no ack from JetStream')
		RETURNING id`).Scan(&id); err != nil {
		t.Fatal(err)
	}
	return id
}

// TestOpsOutboxRetryAndDrop makes events die the way they do — the relay
// cannot publish them (here: the stream refuses messages that large) and
// gives up after its attempts — then lists them, retries one (published
// to EVENTS once the stream takes it, audited) and drops the other
// (audited, gone from the list, never published). Refusals change nothing.
func TestOpsOutboxRetryAndDrop(t *testing.T) {
	t.Parallel()
	env := controldtest.Start(t, controldtest.Options{OutboxMaxAttempts: 2, MetricsAddr: "127.0.0.1:0"})
	ctx := t.Context()
	admin := env.Client(env.AdminToken)
	_, bobToken := env.AddUser(t, "bob@example.test", api.RoleUser)
	bob := env.Client(bobToken)
	_, opToken := env.AddUser(t, "olga@example.test", api.RoleOperator)
	operator := env.Client(opToken)

	js, err := jetstream.New(env.NC)
	if err != nil {
		t.Fatal(err)
	}
	stream, err := js.Stream(ctx, api.EventStreamName)
	if err != nil {
		t.Fatal(err)
	}
	cfg := stream.CachedInfo().Config
	cfg.MaxMsgSize = 2048
	if _, err := js.UpdateStream(ctx, cfg); err != nil {
		t.Fatal(err)
	}
	big := strings.Repeat("x", 4096)
	var ids []int64
	for i := range 2 {
		id, err := outbox.Enqueue(ctx, env.Server.Pool(), time.Now(), outbox.Event{Kind: "test.big", Subject: strconv.Itoa(i),
			Payload: map[string]string{"pad": big}})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
	}
	dead := func() []api.OutboxEvent {
		resp, err := operator.OutboxList(ctx, api.OutboxListRequest{})
		if err != nil {
			t.Fatalf("list: %v", err)
		}
		return resp.Events
	}
	testutil.Eventually(t, "both events dead", func() bool { return len(dead()) == 2 })
	for i, e := range dead() {
		if e.ID != ids[i] || e.State != api.OutboxDead || e.Attempts != 2 || e.LastError == "" || e.Kind != "test.big" {
			t.Fatalf("dead event %d: got %+v; want id %d, dead after 2 attempts with an error", i, e, ids[i])
		}
	}
	if got := obstest.Scrape(t, env.Server.MetricsURL()).Value("gpuaas_outbox_events", "state", "dead"); got != 2 {
		t.Fatalf("gpuaas_outbox_events{state=dead}: got %v; want 2", got)
	}

	// Refusals: nothing changes, nothing is audited.
	audits := func() int { return count(t, env, `SELECT count(*) FROM audit_logs WHERE action LIKE 'outbox.%'`) }
	refusals := []struct {
		name string
		call func() error
		want error
	}{
		{"list by a user", func() error { _, err := bob.OutboxList(ctx, api.OutboxListRequest{}); return err }, api.ErrForbidden},
		{"retry by a user", func() error { _, err := bob.OutboxRetry(ctx, api.OutboxRef{ID: ids[0]}); return err }, api.ErrForbidden},
		{"retry by an operator", func() error { _, err := operator.OutboxRetry(ctx, api.OutboxRef{ID: ids[0]}); return err }, api.ErrForbidden},
		{"drop by an operator", func() error { _, err := operator.OutboxDrop(ctx, api.OutboxRef{ID: ids[1]}); return err }, api.ErrForbidden},
		{"retry of an unknown id", func() error { _, err := admin.OutboxRetry(ctx, api.OutboxRef{ID: ids[1] + 1000}); return err }, api.ErrNotFound},
		{"drop of an unknown id", func() error { _, err := admin.OutboxDrop(ctx, api.OutboxRef{ID: ids[1] + 1000}); return err }, api.ErrNotFound},
		{"list of an unknown state", func() error {
			_, err := operator.OutboxList(ctx, api.OutboxListRequest{State: "lost"})
			return err
		}, api.ErrInvalidArgument},
	}
	for _, r := range refusals {
		if err := r.call(); !errors.Is(err, r.want) {
			t.Errorf("%s: got %v; want %v", r.name, err, r.want)
		}
	}
	if n := audits(); n != 0 {
		t.Fatalf("audit rows after refusals: got %d; want 0", n)
	}
	if got := dead(); len(got) != 2 {
		t.Fatalf("dead events after refusals: got %d; want 2", len(got))
	}

	// The stream takes them again; one is retried, the other dropped.
	if err := outbox.EnsureStream(ctx, js, 1, 1<<30, 7*24*time.Hour); err != nil {
		t.Fatal(err)
	}
	retried, err := admin.OutboxRetry(ctx, api.OutboxRef{ID: ids[0]})
	if err != nil {
		t.Fatalf("retry: %v", err)
	}
	if retried.ID != ids[0] || retried.State != api.OutboxPending || retried.Attempts != 0 {
		t.Fatalf("retried: got %+v; want pending with attempts reset", retried)
	}
	dropped, err := admin.OutboxDrop(ctx, api.OutboxRef{ID: ids[1]})
	if err != nil {
		t.Fatalf("drop: %v", err)
	}
	if dropped.State != api.OutboxDropped {
		t.Fatalf("dropped: got %+v; want dropped", dropped)
	}
	testutil.Eventually(t, "the retried event published", func() bool {
		return count(t, env, `SELECT count(*) FROM outbox_events WHERE id = $1 AND state = 'published'`, ids[0]) == 1
	})
	msg, err := stream.GetLastMsgForSubject(ctx, api.EventSubject("test.big"))
	if err != nil {
		t.Fatalf("the retried event in %s: %v", api.EventStreamName, err)
	}
	if got := msg.Header.Get(jetstream.MsgIDHeader); got != strconv.FormatInt(ids[0], 10) {
		t.Fatalf("last test.big message in the stream: got id %s; want %d (the retried one, never the dropped one)", got, ids[0])
	}
	if got := dead(); len(got) != 0 {
		t.Fatalf("dead events after retry and drop: got %+v; want none", got)
	}
	if n := count(t, env, `SELECT count(*) FROM outbox_events WHERE id = $1 AND state = 'dropped'`, ids[1]); n != 1 {
		t.Fatalf("dropped row: got %d; want it kept, dropped", n)
	}
	for _, a := range []struct {
		action string
		id     int64
	}{{"outbox.retry", ids[0]}, {"outbox.drop", ids[1]}} {
		if n := count(t, env, `SELECT count(*) FROM audit_logs WHERE action = $1 AND target_id = $2 AND actor_id = $3`,
			a.action, strconv.FormatInt(a.id, 10), env.Admin.ID); n != 1 {
			t.Errorf("audit rows %s of %d by the admin: got %d; want 1", a.action, a.id, n)
		}
	}
	if _, err := admin.OutboxRetry(ctx, api.OutboxRef{ID: ids[1]}); !errors.Is(err, api.ErrConflict) {
		t.Fatalf("retry of a dropped event: got %v; want conflict", err)
	}
	if got := obstest.Scrape(t, env.Server.MetricsURL()).Value("gpuaas_outbox_events", "state", "dead"); got != 0 {
		t.Fatalf("gpuaas_outbox_events{state=dead} after: got %v; want 0", got)
	}
}
