package apps_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/gpuaas/gpuaas/controld/apps"
	"github.com/gpuaas/gpuaas/controld/endpoint"
	"github.com/gpuaas/gpuaas/controld/endpoint/endpointtest"
	"github.com/gpuaas/gpuaas/controld/images"
	"github.com/gpuaas/gpuaas/controld/storetest"
	"github.com/gpuaas/gpuaas/internal/api"
)

// served is a database with the app catalog's endpoints over it.
type served struct {
	pool *pgxpool.Pool
	endpointtest.Harness
}

func serveApps(t *testing.T) *served {
	t.Helper()
	pool := newPool(t)
	clock := func() time.Time { return t0 }
	return &served{pool: pool, Harness: endpointtest.Serve(pool, clock,
		apps.Endpoints(apps.Deps{DB: pool, Currency: "usd", Now: clock}))}
}

func caller(user, role string) *endpoint.Request {
	return endpointtest.As(user, role, "")
}

// platformApp publishes and promotes a platform app of a new platform
// image of digestA.
func (s *served) platformApp(t *testing.T, name string) api.App {
	t.Helper()
	ctx := context.Background()
	img, err := images.Publish(ctx, s.pool, images.New{Name: name, Repository: "r/" + name, Digest: digestA, By: "u-1"}, t0)
	if err != nil {
		t.Fatal(err)
	}
	app, err := apps.Publish(ctx, s.pool, apps.New{Name: name, ImageID: img.ID, By: "u-1",
		Manifest: api.AppManifest{Command: []string{"/bin/httpd"}}}, t0)
	if err != nil {
		t.Fatal(err)
	}
	if app, err = apps.Apply(ctx, s.pool, app.ID, api.ImagePromoted, t0); err != nil {
		t.Fatal(err)
	}
	return app
}

// TestPriceSetEndpointCurrency: a price in another currency than the
// platform's is refused with nothing written; none given is the
// platform's, and one given is read regardless of case and spaces. Each
// set is audited with the price before and after and told as app.price,
// also when nothing changed.
func TestPriceSetEndpointCurrency(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := serveApps(t)
	app := s.platformApp(t, "jup")
	set := s.Find(t, api.EndpointAdminAppPriceSet)
	admin := caller("u-1", api.RoleAdmin)
	for _, bad := range []api.AppPriceSetRequest{{App: "jup", Currency: "eur", PricePerHourMinor: 10}, {App: " ", PricePerHourMinor: 10}} {
		if _, err := endpointtest.Mutate[api.AppPrice](ctx, s.Run, set, admin, bad); api.CodeOf(err) != api.CodeInvalidArgument {
			t.Errorf("set %+v: got %v; want invalid_argument", bad, err)
		}
	}
	if n := storetest.Count(t, s.pool, `SELECT count(*) FROM audit_logs`) + storetest.Count(t, s.pool, `SELECT count(*) FROM apps WHERE price_per_hour_minor > 0`); n != 0 {
		t.Fatalf("refused sets wrote %d rows", n)
	}
	for i, req := range []api.AppPriceSetRequest{{App: "jup", PricePerHourMinor: 25}, {App: app.ID, Currency: " USD ", PricePerHourMinor: 25}} {
		p, err := endpointtest.Mutate[api.AppPrice](ctx, s.Run, set, admin, req)
		if err != nil || p.PricePerHourMinor != 25 || p.AppID != app.ID || p.Changed != (i == 0) {
			t.Fatalf("set %d: %+v, %v; want 25, changed %v", i, p, err, i == 0)
		}
	}
	if n := storetest.Count(t, s.pool, `SELECT count(*) FROM audit_logs WHERE action = $1 AND target_id = $2 AND detail->>'currency' = 'usd'`,
		api.EndpointAdminAppPriceSet, app.ID); n != 2 {
		t.Errorf("audit rows of the sets in usd: %d; want 2", n)
	}
	if n := storetest.Count(t, s.pool, `SELECT count(*) FROM outbox_events WHERE kind = $1 AND subject = $2`, api.EventAppPrice, app.ID); n != 2 {
		t.Errorf("app.price events: %d; want 2", n)
	}
	list, err := endpointtest.Read[api.AppPriceList](ctx, s.Find(t, api.EndpointAdminAppPriceList), admin, api.AppPriceListRequest{})
	if err != nil || len(list.Prices) != 1 || list.Prices[0].PricePerHourMinor != 25 {
		t.Fatalf("price list: %+v, %v; want jup at 25", list, err)
	}
}

// TestPublishEndpointRefusals: an oversized manifest, or one named both
// the platform's and a project's, is refused before it is parsed, with
// nothing written; a project member's publish of the project's image
// adds the app, audits it naming the image and tells the project.
func TestPublishEndpointRefusals(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := serveApps(t)
	img, err := images.Publish(ctx, s.pool, images.New{Name: "tiny", ProjectID: "p-1", Repository: "r/tiny", Digest: digestA, By: "u-1"}, t0)
	if err != nil {
		t.Fatal(err)
	}
	publish := s.Find(t, api.EndpointAppPublish)
	ann := caller("u-1", api.RoleUser)
	good := "name: web\nimage: tiny\n"
	for name, req := range map[string]api.AppPublishRequest{
		"oversized":   {Manifest: good + "# " + strings.Repeat("x", apps.MaxManifestBytes), Project: "research"},
		"both scopes": {Manifest: good, Project: "research", Platform: true},
	} {
		if _, err := endpointtest.Mutate[api.App](ctx, s.Run, publish, ann, req); api.CodeOf(err) != api.CodeInvalidArgument {
			t.Errorf("%s: got %v; want invalid_argument", name, err)
		}
	}
	if n := storetest.Count(t, s.pool, `SELECT count(*) FROM apps`) + storetest.Count(t, s.pool, `SELECT count(*) FROM audit_logs`); n != 0 {
		t.Fatalf("refused publishes wrote %d rows", n)
	}
	app, err := endpointtest.Mutate[api.App](ctx, s.Run, publish, ann, api.AppPublishRequest{Manifest: good, Project: "research"})
	if err != nil || app.ProjectID != "p-1" || app.Lifecycle != api.ImagePublished {
		t.Fatalf("publish: %+v, %v; want research's app, published", app, err)
	}
	if n := storetest.Count(t, s.pool, `SELECT count(*) FROM audit_logs WHERE action = $1 AND target_id = $2 AND detail->>'image' = $3`,
		api.EndpointAppPublish, app.ID, img.ID); n != 1 {
		t.Errorf("audit rows of the publish naming its image: %d; want 1", n)
	}
	if n := storetest.Count(t, s.pool, `SELECT count(*) FROM outbox_events WHERE kind = $1 AND users @> ARRAY['u-1']::text[]`, api.EventApp); n != 1 {
		t.Errorf("app events told to the project's owner: %d; want 1", n)
	}
}

// TestDescribeQuotesThePricedPlatformApp: in a run's order, a project's
// app of the same image bytes as a priced platform app is quoted the
// platform app's price (RunPrice); out of it, nothing is quoted.
func TestDescribeQuotesThePricedPlatformApp(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := serveApps(t)
	plat := s.platformApp(t, "jup")
	if _, err := apps.SetPrice(ctx, s.pool, plat.ID, "usd", 40, t0); err != nil {
		t.Fatal(err)
	}
	img, err := images.Publish(ctx, s.pool, images.New{Name: "copy", ProjectID: "p-1", Repository: "r/copy", Digest: digestA, By: "u-1"}, t0)
	if err != nil {
		t.Fatal(err)
	}
	own, err := apps.Publish(ctx, s.pool, apps.New{Name: "mine", ProjectID: "p-1", ImageID: img.ID, By: "u-1",
		Manifest: api.AppManifest{Command: []string{"/bin/httpd"}}}, t0)
	if err != nil {
		t.Fatal(err)
	}
	describe := s.Find(t, api.EndpointAppDescribe)
	ann := caller("u-1", api.RoleUser)
	got, err := endpointtest.Read[api.App](ctx, describe, ann, api.AppRef{App: "mine", Project: "research", RunOrder: true})
	if err != nil || got.ID != own.ID || got.RunPrice == nil || got.RunPrice.AppID != plat.ID || got.RunPrice.PricePerHourMinor != 40 {
		t.Fatalf("describe in run order: %+v, %v; want quoted jup's 40", got, err)
	}
	got, err = endpointtest.Read[api.App](ctx, describe, ann, api.AppRef{App: "mine", Project: "research"})
	if err != nil || got.RunPrice != nil {
		t.Fatalf("describe: %+v, %v; want no quote", got, err)
	}
}
