package images

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/gpuaas/gpuaas/controld/store"
	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/ids"
)

// Catalog is a table of entries named per scope, the platform's and each
// project's own: the images, and controld/apps' published apps. It is
// what looking an entry up by id or by name needs of the table; a name is
// unique within a scope (the tables' unique indexes), not across them.
type Catalog struct {
	// ByName is its owner's query of the ids of a name ($1) in its table,
	// which has a project_id column (NULL: the platform's): written in the
	// owning package, so that the table's reads stay its owner's
	// (controld's ownership tests read it there). The scopes are added here.
	ByName string
	// Noun names an entry in messages and its commands ("image", "app").
	Noun string
	// IDPrefix starts every id of the table (internal/ids).
	IDPrefix string
}

// Images is the image catalog.
var Images = Catalog{ByName: `SELECT id FROM images WHERE name = $1`, Noun: "image", IDPrefix: idPrefix}

// Where is the scopes a name is looked up in: ProjectID's own entries
// ("" for none), and the platform's when Platform. All (WithDigest only)
// is every scope: an operator's look-up, as operators see every entry.
type Where struct {
	ProjectID string
	Platform  bool
	All       bool
}

// NotFound is the answer for ref when it names no entry the caller may
// see: the same whether it names none or one hidden from them.
func (c Catalog) NotFound(ref string) error {
	return api.Errorf(api.CodeNotFound, "no %s %s", c.Noun, ref).WithHint("see `gpuaas " + c.Noun + " list`")
}

// IDs returns the ids of the entries ref names: an id names itself
// (whether it exists is its reader's to say); a name, the entry of that
// name in where's project, then the platform's, at most one of each. No
// entry is not_found.
func (c Catalog) IDs(ctx context.Context, q store.Querier, ref string, where Where) ([]string, error) {
	if ref == "" {
		return nil, api.Errorf(api.CodeInvalidArgument, "which %s? give its name or id", c.Noun)
	}
	if ids.Valid(c.IDPrefix, ref) {
		return []string{ref}, nil
	}
	// ByName is one of this program's constants, never input.
	rows, err := q.Query(ctx, c.ByName+` AND ((project_id = $2 AND $2 <> '') OR (project_id IS NULL AND $3))
		ORDER BY project_id NULLS LAST`, ref, where.ProjectID, where.Platform)
	if err != nil {
		return nil, fmt.Errorf("find %s %s: %w", c.Noun, ref, err)
	}
	out, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, fmt.Errorf("find %s %s: %w", c.Noun, ref, err)
	}
	if len(out) == 0 {
		return nil, c.NotFound(ref)
	}
	return out, nil
}

// ByID returns the image id, locking its row with lock (a change
// follows in the transaction).
func ByID(ctx context.Context, q store.Querier, id string, lock bool) (api.Image, error) {
	return byID(ctx, q, id, lock)
}
