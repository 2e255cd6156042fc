package controld

import (
	"context"

	"github.com/jackc/pgx/v5"

	"github.com/gpuaas/gpuaas/controld/apps"
	"github.com/gpuaas/gpuaas/controld/images"
	"github.com/gpuaas/gpuaas/controld/mutate"
	"github.com/gpuaas/gpuaas/controld/project"
	"github.com/gpuaas/gpuaas/controld/store"
	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/appspec"
)

// maxManifestBytes bounds an app manifest sent to app.publish.
const maxManifestBytes = 64 << 10

// appsCatalogEndpoints are published apps' (controld/apps, docs/apps.md,
// "Publishing apps"). Who may make which move is apps.Decide's; the
// manifest is parsed here, strictly, before anything is read.
func (s *Server) appsCatalogEndpoints() []endpointDef {
	return []endpointDef{
		mutation(s, api.OpAppPublish, s.appPublish),
		query(s, api.OpAppList, s.appList),
		query(s, api.OpAppDescribe, s.appDescribe),
		mutation(s, api.OpAppPromote, s.appChange(apps.ActPromote, api.EndpointAppPromote)),
		mutation(s, api.OpAppDeprecate, s.appChange(apps.ActDeprecate, api.EndpointAppDeprecate)),
		mutation(s, api.OpAppRetire, s.appChange(apps.ActRetire, api.EndpointAppRetire)),
	}
}

func (s *Server) appList(ctx context.Context, c *call, req api.AppListRequest) (*api.AppListResponse, error) {
	pid := ""
	ref, err := s.projectRef(ctx, c, req.Project)
	if err != nil {
		return nil, err
	}
	if ref != "" {
		p, err := project.Authorize(ctx, s.pool, ref, c.principal.UserID, images.PlatformRole(c.request()), project.AccessRead)
		if err != nil {
			return nil, err
		}
		pid = p.ID
	}
	// all lists every app the caller sees: operators every app, others
	// the platform's promoted ones and their project's own.
	out, err := apps.List(ctx, s.pool, pid, req.All && images.IsOperator(c.request()), !req.All)
	if err != nil {
		return nil, err
	}
	return &api.AppListResponse{Apps: out}, nil
}

func (s *Server) appDescribe(ctx context.Context, c *call, req api.AppRef) (*api.App, error) {
	app, _, err := images.FindEntry(ctx, s.pool, c.request(), appKind, images.Ref{Ref: req.App, Project: req.Project, Platform: req.Platform, RunOrder: req.RunOrder}, false)
	if err != nil {
		return nil, err
	}
	if req.RunOrder {
		if app.RunPrice, err = runPrice(ctx, s.pool, app.Digest, &app); err != nil {
			return nil, err
		}
	}
	return &app, nil
}

// runPrice is the own price per hour a run of the image of digest (of
// app own, nil for an image) carries, by workloads.Run's rule
// (docs/decisions/0059-app-prices.md): own's price, unless the priced
// platform app of the same image bytes (apps.PricedImage) costs more.
// `app run --dry-run` quotes it, so the quote is what the run charges.
func runPrice(ctx context.Context, q store.Querier, digest string, own *api.App) (*api.RunPrice, error) {
	p := &api.RunPrice{}
	if own != nil {
		p = &api.RunPrice{App: own.Name, AppID: own.ID, PricePerHourMinor: own.PricePerHourMinor}
	}
	priced, ok, err := apps.PricedImage(ctx, q, digest)
	if err != nil {
		return nil, err
	}
	if ok && priced.PricePerHourMinor > p.PricePerHourMinor {
		p = &api.RunPrice{App: priced.Name, AppID: priced.ID, PricePerHourMinor: priced.PricePerHourMinor}
	}
	return p, nil
}

// appPublishTarget is the app a publish would add, checked with Decide,
// and its image (apps.Image), which the publisher must see.
func (s *Server) appPublishTarget(ctx context.Context, q store.Querier, c *call, req api.AppPublishRequest, spec appspec.App) (api.App, api.Image, error) {
	app := api.App{Name: spec.Name}
	var err error
	if app.Scope, app.ProjectID, app.Project, err = images.PublishScope(ctx, q, c.request(), req.Project, req.Platform); err != nil {
		return app, api.Image{}, err
	}
	who, err := images.CatalogActor(ctx, q, c.request(), app.ProjectID)
	if err != nil {
		return app, api.Image{}, err
	}
	if _, err := apps.Decide(app, apps.ActPublish, who); err != nil {
		return app, api.Image{}, err
	}
	img, err := apps.Image(ctx, q, spec.Image, app.ProjectID)
	if err != nil {
		return app, api.Image{}, err
	}
	iwho, err := images.CatalogActor(ctx, q, c.request(), img.ProjectID)
	if err != nil {
		return app, api.Image{}, err
	}
	if !images.Visible(img, iwho) {
		return app, api.Image{}, apps.NotInCatalog(spec.Image)
	}
	return app, img, nil
}

func (s *Server) appPublish(ctx context.Context, c *call, req api.AppPublishRequest) (work[api.App], error) {
	if len(req.Manifest) > maxManifestBytes {
		return nil, api.Errorf(api.CodeInvalidArgument, "manifest: %d bytes; at most %d", len(req.Manifest), maxManifestBytes)
	}
	if req.Platform && req.Project != "" {
		return nil, api.Errorf(api.CodeInvalidArgument, "an app is the platform's or a project's, not both").
			WithHint("drop --platform or --project")
	}
	spec, err := appspec.Parse([]byte(req.Manifest))
	if err != nil {
		return nil, err
	}
	if err := apps.ValidateName(spec.Name); err != nil {
		return nil, err
	}
	manifest, err := apps.Manifest(spec)
	if err != nil {
		return nil, err
	}
	if _, _, err := s.appPublishTarget(ctx, s.pool, c, req, spec); err != nil {
		return nil, err
	}
	return func(ctx context.Context, tx pgx.Tx) (*api.App, mutate.Effect, error) {
		target, img, err := s.appPublishTarget(ctx, tx, c, req, spec)
		if err != nil {
			return nil, mutate.Effect{}, err
		}
		app, err := apps.Publish(ctx, tx, apps.New{Name: spec.Name, ProjectID: target.ProjectID, ImageID: img.ID,
			Manifest: manifest, By: c.principal.UserID}, s.now())
		if err != nil {
			return nil, mutate.Effect{}, err
		}
		eff, err := appEffect(ctx, tx, api.EndpointAppPublish, app, map[string]any{"image": img.ID, "ref": img.Ref})
		return &app, eff, err
	}, nil
}

// appChange is the handler of a lifecycle move: promote, deprecate,
// retire.
func (s *Server) appChange(action apps.Action, endpoint string) func(context.Context, *call, api.AppRef) (work[api.App], error) {
	return func(_ context.Context, c *call, req api.AppRef) (work[api.App], error) {
		return func(ctx context.Context, tx pgx.Tx) (*api.App, mutate.Effect, error) {
			cur, who, err := images.FindEntry(ctx, tx, c.request(), appKind, images.Ref{Ref: req.App, Project: req.Project, Platform: req.Platform}, true)
			if err != nil {
				return nil, mutate.Effect{}, err
			}
			to, err := apps.Decide(cur, action, who)
			if err != nil {
				return nil, mutate.Effect{}, err
			}
			out, err := apps.Apply(ctx, tx, cur.ID, to, s.now())
			if err != nil {
				return nil, mutate.Effect{}, err
			}
			eff, err := appEffect(ctx, tx, endpoint, out, map[string]any{"lifecycle": []string{cur.Lifecycle, out.Lifecycle}})
			return &out, eff, err
		}, nil
	}
}

// appEffect is an app change's audit row and its one event, told to the
// members of a project's own app's project.
func appEffect(ctx context.Context, q store.Querier, endpoint string, app api.App, detail map[string]any) (mutate.Effect, error) {
	return images.CatalogEffect(ctx, q, endpoint, "app", api.EventApp, app.ID, app.ProjectID, app, detail)
}
