package controld_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/gpuaas/gpuaas/internal/api"
)

// TestAdminAppPriceSet (docs/apps.md, "Prices"): an admin or an operator
// sets a platform app's own price per hour; `admin app-price list` shows
// it and app.describe carries it; the same price again changes nothing
// but is audited; a negative or absurd price, another currency, an
// unknown app, a project's own app (by name and by id) and a user's set
// are refused with the reason and change nothing; `price` in a manifest is
// refused naming it (not a manifest key).
func TestAdminAppPriceSet(t *testing.T) {
	t.Parallel()
	e := newAppsEnv(t)
	ctx := t.Context()
	if _, err := e.admin.AppPublish(ctx, api.AppPublishRequest{Manifest: "name: jup\nimage: tiny\n", Platform: true}); err != nil {
		t.Fatal(err)
	}
	notes, err := e.carol.AppPublish(ctx, api.AppPublishRequest{Manifest: "name: notes\nimage: tiny\n"})
	if err != nil {
		t.Fatal(err)
	}
	audits := func() int {
		return count(t, e.env, `SELECT count(*) FROM audit_logs WHERE action = 'admin.app_price_set'`)
	}
	price := func() int {
		return count(t, e.env, `SELECT price_per_hour_minor FROM apps WHERE name = 'jup' AND project_id IS NULL`)
	}
	p, err := e.admin.AdminAppPriceSet(ctx, api.AppPriceSetRequest{App: "jup", Currency: "USD", PricePerHourMinor: 150})
	if err != nil {
		t.Fatal(err)
	}
	if p.App != "jup" || p.PricePerHourMinor != 150 || p.PreviousMinor != 0 || !p.Changed || p.Currency != "usd" || p.UpdatedAt == nil {
		t.Fatalf("set: %+v; want jup 150 (was 0), changed", *p)
	}
	_, opToken := e.env.AddUser(t, "olga@example.test", api.RoleOperator)
	again, err := e.env.Client(opToken).AdminAppPriceSet(ctx, api.AppPriceSetRequest{App: p.AppID, PricePerHourMinor: 150})
	if err != nil || again.Changed || again.PreviousMinor != 150 || !again.UpdatedAt.Equal(*p.UpdatedAt) {
		t.Errorf("an operator sets the same price by id: %+v, %v; want unchanged, same updated_at", again, err)
	}
	if d, err := e.admin.AppDescribe(ctx, api.AppRef{App: "jup"}); err != nil || d.PricePerHourMinor != 150 {
		t.Errorf("app describe: %+v, %v; want price 150", d, err)
	}
	l, err := e.admin.AdminAppPriceList(ctx)
	if err != nil || len(l.Prices) != 1 || l.Prices[0].App != "jup" || l.Prices[0].PricePerHourMinor != 150 {
		t.Errorf("list: %+v, %v; want jup at 150 alone (a project's app has no price)", l, err)
	}
	if got := audits(); got != 2 {
		t.Errorf("%d audit rows; want 2", got)
	}
	if got := count(t, e.env, `SELECT count(*) FROM outbox_events WHERE kind = 'app.price'`); got != 2 {
		t.Errorf("%d app.price events; want 2", got)
	}
	for _, tc := range []struct {
		name string
		c    *api.Client
		req  api.AppPriceSetRequest
		want error
		says string
	}{
		{"negative", e.admin, api.AppPriceSetRequest{App: "jup", PricePerHourMinor: -1}, api.ErrInvalidArgument, "from 0"},
		{"absurd", e.admin, api.AppPriceSetRequest{App: "jup", PricePerHourMinor: api.MaxAppPricePerHourMinor + 1}, api.ErrInvalidArgument, "from 0"},
		{"another currency", e.admin, api.AppPriceSetRequest{App: "jup", Currency: "eur", PricePerHourMinor: 9}, api.ErrInvalidArgument, "charged in usd"},
		{"no app", e.admin, api.AppPriceSetRequest{PricePerHourMinor: 9}, api.ErrInvalidArgument, "app:"},
		{"unknown app", e.admin, api.AppPriceSetRequest{App: "ghost", PricePerHourMinor: 9}, api.ErrNotFound, "ghost"},
		{"a project's app by name", e.admin, api.AppPriceSetRequest{App: "notes", PricePerHourMinor: 9}, api.ErrInvalidArgument, "only platform apps"},
		{"a project's app by id", e.admin, api.AppPriceSetRequest{App: notes.ID, PricePerHourMinor: 9}, api.ErrInvalidArgument, "only platform apps"},
		{"a project's owner", e.carol, api.AppPriceSetRequest{App: "jup", PricePerHourMinor: 9}, api.ErrForbidden, ""},
	} {
		if _, err := tc.c.AdminAppPriceSet(ctx, tc.req); !errors.Is(err, tc.want) || !strings.Contains(err.Error(), tc.says) {
			t.Errorf("%s: %v; want %v saying %q", tc.name, err, tc.want, tc.says)
		}
	}
	// The price is not a manifest key: a manifest that carries one is
	// refused naming it, a renter's or an operator's.
	for _, c := range []*api.Client{e.carol, e.admin} {
		if _, err := c.AppPublish(ctx, api.AppPublishRequest{Manifest: "name: priced\nimage: tiny\nprice: 1.00\n", Platform: c == e.admin}); !errors.Is(err, api.ErrInvalidArgument) || !strings.Contains(err.Error(), "price") {
			t.Errorf("a manifest with price: %v; want invalid_argument naming price", err)
		}
	}
	if _, err := e.carol.AdminAppPriceList(ctx); !errors.Is(err, api.ErrForbidden) {
		t.Errorf("a user lists prices: %v; want forbidden", err)
	}
	if got := price(); got != 150 {
		t.Errorf("price after the refusals: %d; want 150", got)
	}
	if got := count(t, e.env, `SELECT count(*) FROM apps WHERE price_per_hour_minor <> 0 AND project_id IS NOT NULL`); got != 0 {
		t.Errorf("%d project apps with a price; want 0", got)
	}
	if got := audits(); got != 2 {
		t.Errorf("%d audit rows after the refusals; want 2", got)
	}
}
