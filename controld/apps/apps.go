// Package apps owns published apps (docs/apps.md, "Publishing apps";
// docs/decisions/0051-published-apps.md): app manifests (internal/appspec)
// stored checked, each pinned to a catalog image, the platform's or a
// project's own, with a lifecycle (published → promoted → deprecated →
// retired, transitions.go). An app's trust is its image's (controld/images
// owns it), read with the app and never copied. It owns the apps table;
// controld's handlers call it inside their mutations' transactions.
package apps

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/gpuaas/gpuaas/controld/images"
	"github.com/gpuaas/gpuaas/controld/store"
	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/ids"
)

// idPrefix starts every app id ("app-7k2m9x4q1c").
const idPrefix = "app"

// ValidateName refuses a name an app cannot have: one the catalog cannot
// hold, and one shaped like an id of any kind (internal/ids.Shaped), as
// `app get` takes a workload id or an app name and `app promote` an app
// id or name (docs/apps.md, "Names").
func ValidateName(name string) error {
	if images.ValidateName(name) != nil {
		return api.Errorf(api.CodeInvalidArgument, "name: %q: use 1-63 lower-case letters, digits, '.', '_' or '-'", name)
	}
	if ids.Shaped(name) {
		return api.Errorf(api.CodeInvalidArgument, "name: %q has the shape of an id (like w-…, app-…, img-…): an app's name must not", name).
			WithHint("choose a name that is not a prefix, '-' and 12 letters and digits")
	}
	return nil
}

// New is an app to publish: ProjectID "" is a platform app.
type New struct {
	Name, ProjectID, ImageID, By string
	Manifest                     api.AppManifest
}

// Publish stores n, published. A name the platform (or the project)
// already has, retired or not, is refused.
func Publish(ctx context.Context, q store.Querier, n New, now time.Time) (api.App, error) {
	if err := ValidateName(n.Name); err != nil {
		return api.App{}, err
	}
	raw, err := json.Marshal(n.Manifest)
	if err != nil {
		return api.App{}, fmt.Errorf("publish app %s: %w", n.Name, err)
	}
	id := ids.New(idPrefix)
	_, err = q.Exec(ctx, `INSERT INTO apps (id, name, project_id, image_id, manifest, lifecycle, published_by,
		created_at, updated_at) VALUES ($1,$2,NULLIF($3,''),$4,$5,$6,$7,$8,$8)`,
		id, n.Name, n.ProjectID, n.ImageID, raw, api.ImagePublished, n.By, now.UTC())
	if store.IsUniqueViolation(err, "") {
		where := "the platform"
		if n.ProjectID != "" {
			where = "this project"
		}
		return api.App{}, api.Errorf(api.CodeConflict, "name: an app named %s is already published in %s", n.Name, where).
			WithHint("choose another name (a retired app keeps its name)")
	}
	if err != nil {
		return api.App{}, fmt.Errorf("publish app %s: %w", n.Name, err)
	}
	return byID(ctx, q, id, false)
}

const selectSQL = `SELECT a.id, a.name, coalesce(a.project_id, ''), coalesce(p.name, ''), a.image_id, a.manifest,
	a.lifecycle, a.published_by, a.created_at, a.updated_at, a.price_per_hour_minor
	FROM apps a LEFT JOIN projects p ON p.id = a.project_id `

func scan(row pgx.CollectableRow) (api.App, error) {
	var app api.App
	var raw []byte
	if err := row.Scan(&app.ID, &app.Name, &app.ProjectID, &app.Project, &app.ImageID, &raw,
		&app.Lifecycle, &app.PublishedBy, &app.CreatedAt, &app.UpdatedAt, &app.PricePerHourMinor); err != nil {
		return app, err
	}
	app.Scope = api.ImageScopePlatform
	if app.ProjectID != "" {
		app.Scope = api.ImageScopeProject
	}
	if err := json.Unmarshal(raw, &app.Manifest); err != nil {
		return app, fmt.Errorf("app %s manifest: %w", app.ID, err)
	}
	return app, nil
}

// withImages fills each app's image fields from its image as it is now.
func withImages(ctx context.Context, q store.Querier, list []api.App) error {
	if len(list) == 0 {
		return nil
	}
	want := make([]string, len(list))
	for i, a := range list {
		want[i] = a.ImageID
	}
	imgs, err := images.ByIDs(ctx, q, want)
	if err != nil {
		return err
	}
	for i := range list {
		img := imgs[list[i].ImageID]
		list[i].Image, list[i].Ref, list[i].Digest = img.Name, img.Ref, img.Digest
		list[i].ImageLifecycle, list[i].Trust = img.Lifecycle, img.Trust
		list[i].Runnable = Runnable(list[i])
	}
	return nil
}

func query(ctx context.Context, q store.Querier, sql string, args ...any) ([]api.App, error) {
	rows, err := q.Query(ctx, sql, args...)
	if err != nil {
		return nil, fmt.Errorf("read apps: %w", err)
	}
	out, err := pgx.CollectRows(rows, scan)
	if err != nil {
		return nil, fmt.Errorf("read apps: %w", err)
	}
	return out, withImages(ctx, q, out)
}

func byID(ctx context.Context, q store.Querier, id string, lock bool) (api.App, error) {
	sql := selectSQL + `WHERE a.id = $1`
	if lock {
		sql += ` FOR UPDATE OF a`
	}
	out, err := query(ctx, q, sql, id)
	if err != nil {
		return api.App{}, err
	}
	if len(out) == 0 {
		return api.App{}, notFound(id)
	}
	return out[0], nil
}

// Apps is the published apps' catalog: looked up as images are.
var Apps = images.Catalog{ByName: `SELECT id FROM apps WHERE name = $1`, Noun: "app", IDPrefix: idPrefix}

func notFound(ref string) error { return Apps.NotFound(ref) }

// ByID returns the app id, locking its row with lock (a change follows
// in the transaction).
func ByID(ctx context.Context, q store.Querier, id string, lock bool) (api.App, error) {
	return byID(ctx, q, id, lock)
}

// Find returns the app ref names, by id, or by name: projectID's own app
// of that name first, then the platform's. lock takes the row for the
// rest of the transaction (a change follows).
func Find(ctx context.Context, q store.Querier, ref, projectID string, lock bool) (api.App, error) {
	found, err := Apps.IDs(ctx, q, ref, images.Where{ProjectID: projectID, Platform: true})
	if err != nil {
		return api.App{}, err
	}
	return byID(ctx, q, found[0], lock)
}

// List returns the apps a caller sees: with all, every app; otherwise
// the platform's promoted ones and projectID's own ("" for none),
// platform apps first, by name. runnable keeps those a workload may run
// now (Runnable).
func List(ctx context.Context, q store.Querier, projectID string, all, runnable bool) ([]api.App, error) {
	where := `WHERE (a.project_id IS NULL AND a.lifecycle = 'promoted') OR a.project_id = $1`
	if all {
		where = `WHERE $1::text IS NOT NULL` // every row; $1 stays a parameter
	}
	list, err := query(ctx, q, selectSQL+where+` ORDER BY a.project_id NULLS FIRST, a.name`, projectID)
	if err != nil || !runnable {
		return list, err
	}
	out := list[:0]
	for _, a := range list {
		if a.Runnable {
			out = append(out, a)
		}
	}
	return out, nil
}

// Apply records a move of the app id's lifecycle (Decide's).
func Apply(ctx context.Context, q store.Querier, id, lifecycle string, now time.Time) (api.App, error) {
	if _, err := q.Exec(ctx, `UPDATE apps SET lifecycle = $2, updated_at = $3 WHERE id = $1`, id, lifecycle, now.UTC()); err != nil {
		return api.App{}, fmt.Errorf("change app %s: %w", id, err)
	}
	return byID(ctx, q, id, false)
}
