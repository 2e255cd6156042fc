package controld

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/gpuaas/gpuaas/controld/apps"
	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/appspec"
)

// SeedApp publishes the app manifest (app.yaml's text) as a platform app,
// promoted, unless a platform app of its name exists: then it is left as
// operators made it. `gpuaas dev` seeds the stock app so; its image must
// be a platform image already (SeedImage). A manifest that does not parse
// is an error, and nothing is written.
func (s *Server) SeedApp(ctx context.Context, manifest, by string) (api.App, error) {
	spec, err := appspec.Parse([]byte(manifest))
	if err != nil {
		return api.App{}, fmt.Errorf("seed app: %w", err)
	}
	m, err := apps.Manifest(spec)
	if err != nil {
		return api.App{}, fmt.Errorf("seed app %s: %w", spec.Name, err)
	}
	var out api.App
	err = pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		cur, err := apps.Find(ctx, tx, spec.Name, "", true)
		if err == nil && cur.ProjectID == "" {
			out = cur
			return nil
		}
		if err != nil && !errors.Is(err, api.ErrNotFound) {
			return err
		}
		img, err := apps.Image(ctx, tx, spec.Image, "")
		if err != nil {
			return err
		}
		app, err := apps.Publish(ctx, tx, apps.New{Name: spec.Name, ImageID: img.ID, Manifest: m, By: by}, s.now())
		if err != nil {
			return err
		}
		out, err = apps.Apply(ctx, tx, app.ID, api.ImagePromoted, s.now())
		return err
	})
	if err != nil {
		return api.App{}, fmt.Errorf("seed app %s: %w", spec.Name, err)
	}
	return out, nil
}
