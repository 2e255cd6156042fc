package webhooks

import (
	"encoding/json"
	"errors"
	"os"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/gpuaas/gpuaas/controld/storetest"
	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/ids"
	"github.com/gpuaas/gpuaas/internal/testutil"
)

func TestMain(m *testing.M) { os.Exit(testutil.Main(m)) }

var pgTemplate = storetest.Template("webhooks")

var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

// newProject is a database with one user owning one project.
func newProject(t *testing.T) (*pgxpool.Pool, string, string) {
	t.Helper()
	pool := storetest.Open(t, pgTemplate, 4)
	user, project := ids.New(ids.User), ids.New(ids.Project)
	storetest.User(t, pool, user, "owner@example.test", t0)
	storetest.Project(t, pool, project, "proj", user, t0)
	return pool, user, project
}

func TestIngestQueuesOneDeliveryPerSubscribedWebhookOnce(t *testing.T) {
	pool, user, project := newProject(t)
	ctx := t.Context()
	states, err := Add(ctx, pool, project, "https://a.example.com/", []string{api.EventAllocState}, user, t0)
	if err != nil {
		t.Fatal(err)
	}
	notices, err := Add(ctx, pool, project, "https://b.example.com/", []string{api.EventAllocNotice}, user, t0)
	if err != nil {
		t.Fatal(err)
	}
	data, _ := json.Marshal(api.AllocStateChange{From: api.AllocProvisioning, To: api.AllocActive})
	ev := api.Event{ID: 7, Kind: api.EventAllocState, At: t0, ProjectID: project, Subject: "a-1", Seq: 42, Data: data,
		Users: []string{user}}
	for range 2 { // JetStream redelivers: no second row
		if _, err := enqueueEvent(ctx, pool, ev, t0); err != nil {
			t.Fatal(err)
		}
	}
	ds, err := Deliveries(ctx, pool, project, "", "", 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(ds) != 1 || ds[0].WebhookID != states.ID || ds[0].EventSeq != 42 || ds[0].State != api.DeliveryPending {
		t.Fatalf("deliveries %+v; want one pending to %s", ds, states.ID)
	}
	var b []byte
	if err := pool.QueryRow(ctx, `SELECT body FROM webhook_deliveries WHERE id = $1`, ds[0].ID).Scan(&b); err != nil {
		t.Fatal(err)
	}
	var got map[string]any
	if err := json.Unmarshal(b, &got); err != nil || got["id"] != ds[0].ID || got["seq"] != float64(42) || got["users"] != nil {
		t.Fatalf("body %s: want the delivery id, the event's seq and no user list", b)
	}
	// Removing a webhook drops its undelivered deliveries; the other
	// project's listing never shows them.
	if _, err := Remove(ctx, pool, states.ID, t0); err != nil {
		t.Fatal(err)
	}
	if ds, _ := Deliveries(ctx, pool, project, "", "", 0); len(ds) != 0 {
		t.Fatalf("after remove: %+v; want none", ds)
	}
	if _, err := Get(ctx, pool, states.ID); !errors.Is(err, api.ErrNotFound) {
		t.Fatalf("get removed: %v; want not_found", err)
	}
	if ws, _ := List(ctx, pool, project); len(ws) != 1 || ws[0].ID != notices.ID {
		t.Fatalf("list: %+v; want only %s", ws, notices.ID)
	}
}

func TestAddBoundsWebhooksPerProject(t *testing.T) {
	pool, user, project := newProject(t)
	ctx := t.Context()
	for i := range MaxPerProject {
		if _, err := Add(ctx, pool, project, "https://a.example.com/", []string{api.EventAllocState}, user, t0); err != nil {
			t.Fatalf("webhook %d: %v", i, err)
		}
	}
	if _, err := Add(ctx, pool, project, "https://a.example.com/", []string{api.EventAllocState}, user, t0); !errors.Is(err, api.ErrInvalidArgument) {
		t.Fatalf("one too many: %v; want invalid_argument", err)
	}
}

func TestDeliveriesRefusesUnknownState(t *testing.T) {
	pool, _, project := newProject(t)
	if _, err := Deliveries(t.Context(), pool, project, "", "lost", 0); !errors.Is(err, api.ErrInvalidArgument) {
		t.Fatalf("state lost: %v; want invalid_argument", err)
	}
}
