package apps

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/gpuaas/gpuaas/controld/endpoint"
	"github.com/gpuaas/gpuaas/controld/images"
	"github.com/gpuaas/gpuaas/controld/mutate"
	"github.com/gpuaas/gpuaas/controld/project"
	"github.com/gpuaas/gpuaas/controld/store"
	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/appspec"
)

// MaxManifestBytes bounds an app manifest sent to app.publish.
const MaxManifestBytes = 64 << 10

// Deps is what the app catalog's endpoints use of the server.
type Deps struct {
	DB store.Querier
	// Currency is the platform's one currency, the one apps are charged
	// in (billing.DefaultCurrency).
	Currency string
	Now      func() time.Time
}

// Endpoints are published apps' (docs/apps.md, "Publishing apps") and
// their own prices (docs/apps.md, "Prices";
// docs/decisions/0059-app-prices.md). Who may make which move is
// Decide's; the manifest is parsed here, strictly, before anything is
// read.
func Endpoints(d Deps) []endpoint.Def {
	h := handlers{d}
	return []endpoint.Def{
		endpoint.Mutation(api.OpAppPublish, h.publish),
		endpoint.Query(api.OpAppList, h.list),
		endpoint.Query(api.OpAppDescribe, h.describe),
		endpoint.Mutation(api.OpAppPromote, h.change(ActPromote, api.EndpointAppPromote)),
		endpoint.Mutation(api.OpAppDeprecate, h.change(ActDeprecate, api.EndpointAppDeprecate)),
		endpoint.Mutation(api.OpAppRetire, h.change(ActRetire, api.EndpointAppRetire)),
		endpoint.Mutation(api.OpAdminAppPriceSet, h.priceSet),
		endpoint.Query(api.OpAdminAppPriceList, h.priceList),
	}
}

type handlers struct{ Deps }

// Kind is the app catalog as images.FindEntry reads it: a run takes only
// a promoted app by its name.
var Kind = images.Kind[api.App]{Catalog: Apps, ByID: ByID, Visible: Visible,
	Scope: func(a api.App) (string, string) { return a.ProjectID, a.Project },
	Runs:  func(a api.App) bool { return a.Lifecycle == api.ImagePromoted }}

func (h handlers) list(ctx context.Context, r *endpoint.Request, req api.AppListRequest) (*api.AppListResponse, error) {
	pid := ""
	ref, err := project.Ref(ctx, h.DB, r, req.Project)
	if err != nil {
		return nil, err
	}
	if ref != "" {
		p, err := project.Authorize(ctx, h.DB, ref, r.Principal.UserID, images.PlatformRole(r), project.AccessRead)
		if err != nil {
			return nil, err
		}
		pid = p.ID
	}
	// all lists every app the caller sees: operators every app, others
	// the platform's promoted ones and their project's own.
	out, err := List(ctx, h.DB, pid, req.All && images.IsOperator(r), !req.All)
	if err != nil {
		return nil, err
	}
	return &api.AppListResponse{Apps: out}, nil
}

func (h handlers) describe(ctx context.Context, r *endpoint.Request, req api.AppRef) (*api.App, error) {
	app, _, err := images.FindEntry(ctx, h.DB, r, Kind,
		images.Ref{Ref: req.App, Project: req.Project, Platform: req.Platform, RunOrder: req.RunOrder}, false)
	if err != nil {
		return nil, err
	}
	if req.RunOrder {
		if app.RunPrice, err = RunPrice(ctx, h.DB, app.Digest, &app); err != nil {
			return nil, err
		}
	}
	return &app, nil
}

// RunPrice is the own price per hour a run of the image of digest (of
// app own, nil for an image) carries, by workloads.Run's rule
// (docs/decisions/0059-app-prices.md): own's price, unless the priced
// platform app of the same image bytes (PricedImage) costs more.
// `app run --dry-run` quotes it, so the quote is what the run charges.
func RunPrice(ctx context.Context, q store.Querier, digest string, own *api.App) (*api.RunPrice, error) {
	p := &api.RunPrice{}
	if own != nil {
		p = &api.RunPrice{App: own.Name, AppID: own.ID, PricePerHourMinor: own.PricePerHourMinor}
	}
	priced, ok, err := PricedImage(ctx, q, digest)
	if err != nil {
		return nil, err
	}
	if ok && priced.PricePerHourMinor > p.PricePerHourMinor {
		p = &api.RunPrice{App: priced.Name, AppID: priced.ID, PricePerHourMinor: priced.PricePerHourMinor}
	}
	return p, nil
}

// publishTarget is the app a publish would add, checked with Decide,
// and its image (Image), which the publisher must see.
func publishTarget(ctx context.Context, q store.Querier, r *endpoint.Request, req api.AppPublishRequest, spec appspec.App) (api.App, api.Image, error) {
	app := api.App{Name: spec.Name}
	var err error
	if app.Scope, app.ProjectID, app.Project, err = images.PublishScope(ctx, q, r, req.Project, req.Platform); err != nil {
		return app, api.Image{}, err
	}
	who, err := images.CatalogActor(ctx, q, r, app.ProjectID)
	if err != nil {
		return app, api.Image{}, err
	}
	if _, err := Decide(app, ActPublish, who); err != nil {
		return app, api.Image{}, err
	}
	img, err := Image(ctx, q, spec.Image, app.ProjectID)
	if err != nil {
		return app, api.Image{}, err
	}
	iwho, err := images.CatalogActor(ctx, q, r, img.ProjectID)
	if err != nil {
		return app, api.Image{}, err
	}
	if !images.Visible(img, iwho) {
		return app, api.Image{}, NotInCatalog(spec.Image)
	}
	return app, img, nil
}

func (h handlers) publish(ctx context.Context, r *endpoint.Request, req api.AppPublishRequest) (endpoint.Work[api.App], error) {
	if len(req.Manifest) > MaxManifestBytes {
		return nil, api.Errorf(api.CodeInvalidArgument, "manifest: %d bytes; at most %d", len(req.Manifest), MaxManifestBytes)
	}
	if req.Platform && req.Project != "" {
		return nil, api.Errorf(api.CodeInvalidArgument, "an app is the platform's or a project's, not both").
			WithHint("drop --platform or --project")
	}
	spec, err := appspec.Parse([]byte(req.Manifest))
	if err != nil {
		return nil, err
	}
	if err := ValidateName(spec.Name); err != nil {
		return nil, err
	}
	manifest, err := Manifest(spec)
	if err != nil {
		return nil, err
	}
	if _, _, err := publishTarget(ctx, h.DB, r, req, spec); err != nil {
		return nil, err
	}
	return func(ctx context.Context, tx pgx.Tx) (*api.App, mutate.Effect, error) {
		target, img, err := publishTarget(ctx, tx, r, req, spec)
		if err != nil {
			return nil, mutate.Effect{}, err
		}
		app, err := Publish(ctx, tx, New{Name: spec.Name, ProjectID: target.ProjectID, ImageID: img.ID,
			Manifest: manifest, By: r.Principal.UserID}, h.Now())
		if err != nil {
			return nil, mutate.Effect{}, err
		}
		eff, err := effect(ctx, tx, api.EndpointAppPublish, app, map[string]any{"image": img.ID, "ref": img.Ref})
		return &app, eff, err
	}, nil
}

// change is the handler of a lifecycle move: promote, deprecate, retire
// (action, audited as name).
func (h handlers) change(action Action, name string) func(context.Context, *endpoint.Request, api.AppRef) (endpoint.Work[api.App], error) {
	return func(_ context.Context, r *endpoint.Request, req api.AppRef) (endpoint.Work[api.App], error) {
		return func(ctx context.Context, tx pgx.Tx) (*api.App, mutate.Effect, error) {
			cur, who, err := images.FindEntry(ctx, tx, r, Kind, images.Ref{Ref: req.App, Project: req.Project, Platform: req.Platform}, true)
			if err != nil {
				return nil, mutate.Effect{}, err
			}
			to, err := Decide(cur, action, who)
			if err != nil {
				return nil, mutate.Effect{}, err
			}
			out, err := Apply(ctx, tx, cur.ID, to, h.Now())
			if err != nil {
				return nil, mutate.Effect{}, err
			}
			eff, err := effect(ctx, tx, name, out, map[string]any{"lifecycle": []string{cur.Lifecycle, out.Lifecycle}})
			return &out, eff, err
		}, nil
	}
}

// effect is an app change's audit row and its one event, told to the
// members of a project's own app's project.
func effect(ctx context.Context, q store.Querier, name string, app api.App, detail map[string]any) (mutate.Effect, error) {
	return images.CatalogEffect(ctx, q, name, "app", api.EventApp, app.ID, app.ProjectID, app, detail)
}
