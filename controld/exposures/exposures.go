// Package exposures owns the exposures table: ports of allocations served
// over HTTPS by the gateway's front (docs/expose.md). An exposure is live
// from its creation until it is removed, expires, or its allocation is
// released; the gateway asks controld, on each new credential, whether a
// caller may reach a live one (gate.authorize_http).
package exposures

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/gpuaas/gpuaas/controld/store"
	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/ids"
)

// idPrefix is exposures' id prefix.
const idPrefix = "ex"

// MaxPerAllocation bounds an allocation's live exposures.
const MaxPerAllocation = 20

// Reasons an exposure ended (its ended column).
const (
	EndedRemoved  = "removed"
	EndedReleased = "released"
	EndedExpired  = "expired"
)

const cols = `id, project_id, allocation_id, port, share, name, expires_at, created_by, created_at, removed_at, ended`

func scan(r pgx.CollectableRow) (api.Exposure, error) {
	var e api.Exposure
	err := r.Scan(&e.ID, &e.ProjectID, &e.AllocationID, &e.Port, &e.Share, &e.Name, &e.ExpiresAt, &e.CreatedBy,
		&e.CreatedAt, &e.RemovedAt, &e.Ended)
	e.Host = api.ExposureHost(e.AllocationID, e.Port)
	e.ExpiresAt, e.CreatedAt = e.ExpiresAt.UTC(), e.CreatedAt.UTC()
	if e.RemovedAt != nil {
		t := e.RemovedAt.UTC()
		e.RemovedAt = &t
	}
	return e, err
}

// CreateArgs is what Create stores; the caller checked the fields
// (api.CheckExposePort, CheckExposeShare, CheckExposeName, ParseExposeTTL)
// and that the actor may write to the allocation's project.
type CreateArgs struct {
	ProjectID, AllocationID string
	Port                    int
	Share, Name             string
	TTL                     time.Duration
	ActorID                 string
}

// Create stores a live exposure. A port of the allocation already exposed,
// or a name in use in the project, is a conflict; expired exposures in the
// way are ended first (as expired), so their port and name are free again.
func Create(ctx context.Context, q store.Querier, a CreateArgs, now time.Time) (api.Exposure, error) {
	now = now.UTC()
	if _, err := q.Exec(ctx, `UPDATE exposures SET removed_at = $2, ended = 'expired'
		WHERE removed_at IS NULL AND expires_at <= $2 AND (allocation_id = $1 OR project_id = $3)`,
		a.AllocationID, now, a.ProjectID); err != nil {
		return api.Exposure{}, fmt.Errorf("end expired exposures: %w", err)
	}
	var sameName bool
	var samePort string
	var n int
	if err := q.QueryRow(ctx, `SELECT
		coalesce((SELECT id FROM exposures WHERE removed_at IS NULL AND allocation_id = $1 AND port = $2), ''),
		$4 <> '' AND EXISTS (SELECT 1 FROM exposures WHERE removed_at IS NULL AND project_id = $3 AND name = $4),
		(SELECT count(*) FROM exposures WHERE removed_at IS NULL AND allocation_id = $1)`,
		a.AllocationID, a.Port, a.ProjectID, a.Name).Scan(&samePort, &sameName, &n); err != nil {
		return api.Exposure{}, fmt.Errorf("check exposures: %w", err)
	}
	switch {
	case samePort != "":
		return api.Exposure{}, api.Errorf(api.CodeConflict, "port %d of %s is already exposed (%s)", a.Port, a.AllocationID, samePort).
			WithHint("see `gpuaas expose list`; `gpuaas expose rm " + samePort + "` ends it")
	case sameName:
		return api.Exposure{}, api.Errorf(api.CodeConflict, "an exposure of the project is already named %q", a.Name).
			WithHint("choose another --name, or `gpuaas expose rm " + a.Name + "`")
	case n >= MaxPerAllocation:
		return api.Exposure{}, api.Errorf(api.CodeInvalidArgument, "allocation %s has %d exposures, the most it may have", a.AllocationID, n).
			WithHint("end one with `gpuaas expose rm ID`")
	}
	e := api.Exposure{ID: ids.New(idPrefix), ProjectID: a.ProjectID, AllocationID: a.AllocationID, Port: a.Port,
		Share: a.Share, Name: a.Name, Host: api.ExposureHost(a.AllocationID, a.Port), ExpiresAt: now.Add(a.TTL),
		CreatedBy: a.ActorID, CreatedAt: now}
	if _, err := q.Exec(ctx, `INSERT INTO exposures (id, project_id, allocation_id, port, share, name, expires_at,
		created_by, created_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)`, e.ID, e.ProjectID, e.AllocationID, e.Port,
		e.Share, e.Name, e.ExpiresAt, e.CreatedBy, e.CreatedAt); err != nil {
		return api.Exposure{}, fmt.Errorf("create exposure: %w", err)
	}
	return e, nil
}

// List returns the live exposures of a project (allocationID "": all of
// them), oldest first. An exposure past its expiry is not live.
func List(ctx context.Context, q store.Querier, projectID, allocationID string, now time.Time) ([]api.Exposure, error) {
	rows, err := q.Query(ctx, `SELECT `+cols+` FROM exposures WHERE project_id = $1 AND removed_at IS NULL
		AND expires_at > $3 AND ($2 = '' OR allocation_id = $2) ORDER BY created_at, id`, projectID, allocationID, now.UTC())
	if err != nil {
		return nil, fmt.Errorf("list exposures: %w", err)
	}
	es, err := pgx.CollectRows(rows, scan)
	if err != nil {
		return nil, fmt.Errorf("list exposures: %w", err)
	}
	return es, nil
}

// Find returns the live exposure ref names: its id, or its name in
// projectID ("" to accept ids only). not_found otherwise.
func Find(ctx context.Context, q store.Querier, projectID, ref string, now time.Time) (api.Exposure, error) {
	rows, err := q.Query(ctx, `SELECT `+cols+` FROM exposures WHERE removed_at IS NULL AND expires_at > $3
		AND (id = $1 OR ($2 <> '' AND project_id = $2 AND name = $1)) ORDER BY id = $1 DESC LIMIT 1`,
		ref, projectID, now.UTC())
	if err != nil {
		return api.Exposure{}, fmt.Errorf("find exposure: %w", err)
	}
	e, err := pgx.CollectExactlyOneRow(rows, scan)
	if errors.Is(err, pgx.ErrNoRows) {
		return api.Exposure{}, api.Errorf(api.CodeNotFound, "no live exposure %s", ref).WithHint("see `gpuaas expose list`")
	}
	if err != nil {
		return api.Exposure{}, fmt.Errorf("find exposure: %w", err)
	}
	return e, nil
}

// ByHost returns the newest exposure of port of allocationID, live or
// ended (the front tells "gone" from "never existed"); found is false when
// there was none.
func ByHost(ctx context.Context, q store.Querier, allocationID string, port int) (e api.Exposure, found bool, err error) {
	rows, err := q.Query(ctx, `SELECT `+cols+` FROM exposures WHERE allocation_id = $1 AND port = $2
		ORDER BY removed_at IS NULL DESC, created_at DESC LIMIT 1`, allocationID, port)
	if err != nil {
		return e, false, fmt.Errorf("exposure by host: %w", err)
	}
	e, err = pgx.CollectExactlyOneRow(rows, scan)
	if errors.Is(err, pgx.ErrNoRows) {
		return e, false, nil
	}
	if err != nil {
		return e, false, fmt.Errorf("exposure by host: %w", err)
	}
	return e, true, nil
}

// Remove ends a live exposure (ended: removed).
func Remove(ctx context.Context, q store.Querier, id string, now time.Time) (api.Exposure, error) {
	rows, err := q.Query(ctx, `UPDATE exposures SET removed_at = $2, ended = 'removed'
		WHERE id = $1 AND removed_at IS NULL RETURNING `+cols, id, now.UTC())
	if err != nil {
		return api.Exposure{}, fmt.Errorf("remove exposure: %w", err)
	}
	e, err := pgx.CollectExactlyOneRow(rows, scan)
	if errors.Is(err, pgx.ErrNoRows) {
		return api.Exposure{}, api.Errorf(api.CodeNotFound, "no live exposure %s", id).WithHint("see `gpuaas expose list`")
	}
	if err != nil {
		return api.Exposure{}, fmt.Errorf("remove exposure: %w", err)
	}
	return e, nil
}

// EndForAllocation ends every exposure of a released allocation (ended:
// released) and returns them, for their events.
func EndForAllocation(ctx context.Context, q store.Querier, allocationID string, now time.Time) ([]api.Exposure, error) {
	rows, err := q.Query(ctx, `UPDATE exposures SET removed_at = $2,
		ended = CASE WHEN expires_at <= $2 THEN 'expired' ELSE 'released' END
		WHERE allocation_id = $1 AND removed_at IS NULL RETURNING `+cols, allocationID, now.UTC())
	if err != nil {
		return nil, fmt.Errorf("end exposures of %s: %w", allocationID, err)
	}
	es, err := pgx.CollectRows(rows, scan)
	if err != nil {
		return nil, fmt.Errorf("end exposures of %s: %w", allocationID, err)
	}
	return es, nil
}
