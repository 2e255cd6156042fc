package controld_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/gpuaas/gpuaas/controld/controldtest"
	"github.com/gpuaas/gpuaas/internal/api"
)

// TestAdminVolumePriceSet: an admin sets the GiB-month price; `volume
// create --dry-run` (volume.quote) prices with it at once; the same price
// again changes nothing but is audited; a price in another currency,
// negative or absurd, and a non-admin's, are refused and change nothing.
func TestAdminVolumePriceSet(t *testing.T) {
	t.Parallel()
	env := controldtest.Start(t, controldtest.Options{})
	ctx := t.Context()
	admin := env.Client(env.AdminToken)
	_, userToken := env.AddUser(t, "uma@example.test", api.RoleUser)
	price := func() int64 {
		t.Helper()
		return int64(count(t, env, `SELECT price_per_gib_month_minor FROM volume_prices WHERE currency = 'usd'`))
	}
	audits := func() int {
		return count(t, env, `SELECT count(*) FROM audit_logs WHERE action = 'admin.volume_price_set'`)
	}
	p, err := admin.AdminVolumePriceSet(ctx, api.VolumePriceSetRequest{Currency: "USD", PricePerGiBMonthMinor: 12})
	if err != nil {
		t.Fatal(err)
	}
	if p.Currency != "usd" || p.PricePerGiBMonthMinor != 12 || p.PreviousMinor != 10 || !p.Changed || p.UpdatedAt.IsZero() {
		t.Fatalf("set: %+v; want usd 12 (was 10), changed", *p)
	}
	q, err := admin.VolumeQuote(ctx, api.VolumeCreateRequest{Name: "data", Size: "100G", Node: "sim-h100-1"})
	if err != nil {
		t.Fatal(err)
	}
	if q.PricePerGiBMonthMinor != 12 || q.PricePerMonthMinor != 1200 {
		t.Errorf("dry run after the change: %+v; want 12 per GiB-month, 1200 a month", *q)
	}
	again, err := admin.AdminVolumePriceSet(ctx, api.VolumePriceSetRequest{PricePerGiBMonthMinor: 12})
	if err != nil || again.Changed || again.PreviousMinor != 12 || !again.UpdatedAt.Equal(p.UpdatedAt) {
		t.Errorf("same price again: %+v, %v; want unchanged, same updated_at", again, err)
	}
	if got := audits(); got != 2 {
		t.Errorf("%d audit rows; want 2", got)
	}
	if got := count(t, env, `SELECT count(*) FROM outbox_events WHERE kind = 'volume.price'`); got != 2 {
		t.Errorf("%d volume.price events; want 2", got)
	}
	for _, tc := range []struct {
		name string
		c    *api.Client
		req  api.VolumePriceSetRequest
		want error
		says string
	}{
		{"another currency", admin, api.VolumePriceSetRequest{Currency: "eur", PricePerGiBMonthMinor: 9}, api.ErrInvalidArgument, "charged in usd"},
		{"negative", admin, api.VolumePriceSetRequest{PricePerGiBMonthMinor: -1}, api.ErrInvalidArgument, "from 0"},
		{"absurd", admin, api.VolumePriceSetRequest{PricePerGiBMonthMinor: api.MaxVolumePricePerGiBMonthMinor + 1}, api.ErrInvalidArgument, "from 0"},
		{"a user", env.Client(userToken), api.VolumePriceSetRequest{PricePerGiBMonthMinor: 1}, api.ErrForbidden, ""},
	} {
		if _, err := tc.c.AdminVolumePriceSet(ctx, tc.req); !errors.Is(err, tc.want) || !strings.Contains(err.Error(), tc.says) {
			t.Errorf("%s: %v; want %v saying %q", tc.name, err, tc.want, tc.says)
		}
	}
	if got := price(); got != 12 {
		t.Errorf("price after the refusals: %d; want 12", got)
	}
	if got := audits(); got != 2 {
		t.Errorf("%d audit rows after the refusals; want 2", got)
	}
}
