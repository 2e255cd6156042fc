package controld_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/gpuaas/gpuaas/controld/controldtest"
	"github.com/gpuaas/gpuaas/internal/api"
)

// TestVolumeQuote: volume.quote (`volume create --dry-run`) prices a
// volume per month and per hour at the catalog's price, checks what a
// create checks, refuses a viewer, and makes nothing, audits nothing and
// tells nobody. (The CLI's --dry-run: cli/volume TestCreateDryRunAgainstControld.)
func TestVolumeQuote(t *testing.T) {
	t.Parallel()
	env := controldtest.Start(t, controldtest.Options{})
	ctx := t.Context()
	admin := env.Client(env.AdminToken)
	_, viewerToken := env.AddUser(t, "vera@example.test", api.RoleUser)
	if _, err := admin.ProjectAddMember(ctx, api.AddMemberRequest{Project: controldtest.ProjectName,
		Email: "vera@example.test", Role: api.ProjectViewer}); err != nil {
		t.Fatal(err)
	}
	before := countEffects(t, env)
	q, err := admin.VolumeQuote(ctx, api.VolumeCreateRequest{Name: "data", Size: "100G", Node: "sim-h100-1"})
	if err != nil {
		t.Fatal(err)
	}
	// 100 GiB at $0.10 per GiB-month: $10.00 a month, 1000/730 cents an hour.
	want := api.VolumeQuote{Name: "data", SizeBytes: 100 << 30, NodeID: q.NodeID, Node: "sim-h100-1", PricePerGiBMonthMinor: 10,
		PricePerMonthMinor: 1000, PricePerHourMinor: 1000.0 / 730, Currency: "usd"}
	if *q != want || q.NodeID == "" {
		t.Fatalf("quote %+v; want %+v", *q, want)
	}
	for _, tc := range []struct {
		name string
		req  api.VolumeCreateRequest
		want error
		says string
	}{
		{"zero", api.VolumeCreateRequest{Name: "data", Size: "0"}, api.ErrInvalidArgument, "size"},
		{"negative", api.VolumeCreateRequest{Name: "data", Size: "-1G"}, api.ErrInvalidArgument, "size"},
		{"unknown unit", api.VolumeCreateRequest{Name: "data", Size: "1.5X"}, api.ErrInvalidArgument, "size"},
		{"bad name", api.VolumeCreateRequest{Name: "My Data", Size: "1G"}, api.ErrInvalidArgument, "name"},
		{"unknown node", api.VolumeCreateRequest{Name: "data", Size: "1G", Node: "ghost"}, api.ErrNotFound, "ghost"},
	} {
		if _, err := admin.VolumeQuote(ctx, tc.req); !errors.Is(err, tc.want) || !strings.Contains(err.Error(), tc.says) {
			t.Errorf("%s: %v; want %v saying %q", tc.name, err, tc.want, tc.says)
		}
	}
	if _, err := env.Client(viewerToken).VolumeQuote(ctx, api.VolumeCreateRequest{Name: "data", Size: "1G"}); !errors.Is(err, api.ErrForbidden) {
		t.Errorf("quote by a viewer: %v; want forbidden", err)
	}
	if got := countEffects(t, env); got != before {
		t.Errorf("quotes changed %+v into %+v", before, got)
	}
	if _, err := admin.VolumeCreate(ctx, api.VolumeCreateRequest{Name: "data", Size: "1G", Node: "sim-h100-1"}); err != nil {
		t.Fatal(err)
	}
	after := countEffects(t, env)
	if _, err := admin.VolumeQuote(ctx, api.VolumeCreateRequest{Name: "data", Size: "1G"}); !errors.Is(err, api.ErrConflict) {
		t.Errorf("quote of a name in use: %v; want conflict", err)
	}
	if got := countEffects(t, env); got != after {
		t.Errorf("a quote changed %+v into %+v", after, got)
	}
	if n := count(t, env, `SELECT count(*) FROM volumes`); n != 1 {
		t.Errorf("%d volumes; want only the one created", n)
	}

}
