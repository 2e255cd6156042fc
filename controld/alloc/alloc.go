// Package alloc owns allocations: their state machine (the only code that
// changes allocations.state), creation with placement, release, and the
// FIFO queue of requests waiting for capacity.
package alloc

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/gpuaas/gpuaas/controld/billing"
	"github.com/gpuaas/gpuaas/controld/identity"
	"github.com/gpuaas/gpuaas/controld/node"
	"github.com/gpuaas/gpuaas/controld/outbox"
	"github.com/gpuaas/gpuaas/controld/project"
	"github.com/gpuaas/gpuaas/controld/store"
	"github.com/gpuaas/gpuaas/controld/tasks"
	"github.com/gpuaas/gpuaas/internal/api"
)

// Actor is who acts on an allocation.
type Actor struct {
	UserID string
	Role   string // platform role
}

// ActorOf is the caller p as allocations, and the jobs, workloads and
// usage on them, check access: its user and platform role.
func ActorOf(p *identity.Principal) Actor {
	return Actor{UserID: p.UserID, Role: p.Role}
}

func (a Actor) operator() bool { return a.Role == api.RoleOperator || a.Role == api.RoleAdmin }

const allocColumns = `SELECT id, project_id, user_id, sku_id, shape, gpus, state, version, queued,
	coalesce(node_id, ''), reason, created_at, updated_at FROM allocations`

func scanAlloc(r pgx.CollectableRow) (api.Allocation, error) {
	var a api.Allocation
	err := r.Scan(&a.ID, &a.ProjectID, &a.UserID, &a.SKU, &a.Shape, &a.GPUs, &a.State, &a.Version, &a.Queued,
		&a.NodeID, &a.Reason, &a.CreatedAt, &a.UpdatedAt)
	a.Slots = []api.Slot{}
	return a, err
}

// load reads one allocation with its slots.
func load(ctx context.Context, q store.Querier, id string) (api.Allocation, error) {
	rows, err := q.Query(ctx, allocColumns+` WHERE id=$1`, id)
	if err != nil {
		return api.Allocation{}, fmt.Errorf("load allocation: %w", err)
	}
	a, err := pgx.CollectExactlyOneRow(rows, scanAlloc)
	if errors.Is(err, pgx.ErrNoRows) {
		return a, notFound(id)
	}
	if err != nil {
		return a, fmt.Errorf("load allocation: %w", err)
	}
	if a.Slots, err = node.Slots(ctx, q, `allocation_id = $1`, a.ID); err != nil {
		return a, err
	}
	return a, nil
}

// lockAndLoad is load for a transaction about to change the allocation:
// it first takes the row's lock, waiting for any transaction changing it,
// so what it reads is current and transition's optimistic lock cannot
// fail on a change that committed meanwhile (hostd's provisioning result
// racing a user's release, say). Every change of an allocation that
// starts from its current state goes through here; only a stale read
// held across transactions (a client's version) still meets conflict.
func lockAndLoad(ctx context.Context, tx pgx.Tx, id string) (api.Allocation, error) {
	var locked string
	err := tx.QueryRow(ctx, `SELECT id FROM allocations WHERE id = $1 FOR UPDATE`, id).Scan(&locked)
	if errors.Is(err, pgx.ErrNoRows) {
		return api.Allocation{}, notFound(id)
	}
	if err != nil {
		return api.Allocation{}, fmt.Errorf("lock allocation: %w", err)
	}
	return load(ctx, tx, id)
}

func notFound(id string) error {
	return api.Errorf(api.CodeNotFound, "allocation %s not found", id).WithHint("see `gpuaas alloc list`")
}

// Get returns an allocation the actor may see. Allocations in projects the
// actor cannot read are reported as not found.
func Get(ctx context.Context, q store.Batcher, actor Actor, id string) (api.Allocation, error) {
	return get(ctx, q, actor, id, false)
}

// GetWithTimeline is Get with the allocation's task timeline.
//
// with queues more reads into the same batch (another package's, such as
// the idle policy), so that alloc.get stays one round trip; their results
// must be dropped when this returns an error (the actor may not see the
// allocation).
func GetWithTimeline(ctx context.Context, q store.Batcher, actor Actor, id string, with ...func(*pgx.Batch)) (api.Allocation, error) {
	return get(ctx, q, actor, id, true, with...)
}

// getSQL is one allocation with the actor's role in its project ("" when
// not a member), so that the authorization check needs no query of its
// own.
//
// A queued request's place in line counts the requests of its SKU queued
// before it, in the order placeHead takes them.
const getSQL = `SELECT a.id, a.project_id, a.user_id, a.sku_id, a.shape, a.gpus, a.state, a.version, a.queued,
	CASE WHEN a.queued THEN (SELECT count(*) + 1 FROM allocations o WHERE o.queued AND o.sku_id = a.sku_id
		AND (o.created_at, o.id) < (a.created_at, a.id)) ELSE 0 END,
	coalesce(a.node_id, ''), a.reason, a.created_at, a.updated_at,
	coalesce((SELECT m.role FROM project_members m WHERE m.project_id = a.project_id AND m.user_id = $2), '')
	FROM allocations a WHERE a.id = $1`

// get reads the allocation, the actor's role, its slots, its usage and
// (withTimeline) its timeline in one round trip: one batch, each query
// its owner's. What belongs to an allocation the actor may not see is
// read and dropped.
func get(ctx context.Context, q store.Batcher, actor Actor, id string, withTimeline bool, with ...func(*pgx.Batch)) (api.Allocation, error) {
	var (
		a        api.Allocation
		role     string
		found    bool
		usage    billing.Usage
		metered  bool
		timeline []api.PhaseTiming
	)
	b := &pgx.Batch{}
	b.Queue(getSQL, id, actor.UserID).Query(func(rows pgx.Rows) error {
		var err error
		a, err = pgx.CollectExactlyOneRow(rows, func(r pgx.CollectableRow) (api.Allocation, error) {
			var a api.Allocation
			err := r.Scan(&a.ID, &a.ProjectID, &a.UserID, &a.SKU, &a.Shape, &a.GPUs, &a.State, &a.Version, &a.Queued,
				&a.QueuePosition, &a.NodeID, &a.Reason, &a.CreatedAt, &a.UpdatedAt, &role)
			return a, err
		})
		if errors.Is(err, pgx.ErrNoRows) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("load allocation: %w", err)
		}
		found = true
		return nil
	})
	var slots []api.Slot
	node.QueueSlots(b, &slots, `allocation_id = $1`, id)
	billing.QueueAllocationUsage(b, &usage, &metered, id)
	if withTimeline {
		tasks.QueueTimeline(b, &timeline, id)
	}
	for _, queue := range with {
		queue(b)
	}
	if err := q.SendBatch(ctx, b).Close(); err != nil {
		return api.Allocation{}, err
	}
	if !found || project.AccessFor(role, actor.Role) < project.AccessRead {
		return api.Allocation{}, notFound(id)
	}
	a.Slots = slots
	if a.Slots == nil {
		a.Slots = []api.Slot{}
	}
	if metered {
		a.Usage = usageOf(usage)
	}
	a.Timeline = timeline
	return a, nil
}

// OpenInProject lists the allocations of a project that are not final
// and not already releasing: what a depleted account has to give back.
func OpenInProject(ctx context.Context, q store.Querier, projectID string) ([]string, error) {
	rows, err := q.Query(ctx, `SELECT id FROM allocations WHERE project_id = $1
		AND state IN ('requested', 'provisioning', 'active') ORDER BY created_at, id`, projectID)
	if err != nil {
		return nil, fmt.Errorf("open allocations of %s: %w", projectID, err)
	}
	out, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, fmt.Errorf("open allocations of %s: %w", projectID, err)
	}
	return out, nil
}

// List returns the actor's allocations, newest first: in one project when
// req.Project is set, else across every project the actor belongs to.
// Released and failed allocations are left out unless req.All or a state
// filter asks for them.
func List(ctx context.Context, q store.Querier, actor Actor, req api.AllocListRequest) ([]api.Allocation, error) {
	var where string
	var args []any
	// names are the listed projects' names: each row says its project.
	names := map[string]string{}
	if req.Project == "" {
		mine, err := project.ListForUser(ctx, q, actor.UserID)
		if err != nil {
			return nil, err
		}
		ids := make([]string, len(mine))
		for i, p := range mine {
			ids[i], names[p.ID] = p.ID, p.Name
		}
		where, args = `project_id = ANY($1)`, []any{ids}
	} else {
		p, err := project.Authorize(ctx, q, req.Project, actor.UserID, actor.Role, project.AccessRead)
		if err != nil {
			return nil, err
		}
		where, args = `project_id = $1`, []any{p.ID}
		names[p.ID] = p.Name
	}
	switch {
	case req.State != "":
		if _, ok := transitions[req.State]; !ok {
			return nil, api.Errorf(api.CodeInvalidArgument, "unknown state %q", req.State).
				WithHint("states: requested, provisioning, active, releasing, released, failed, release_failed")
		}
		where += ` AND state = $2`
		args = append(args, req.State)
	case !req.All:
		where += ` AND state NOT IN ('released', 'failed')`
	}
	rows, err := q.Query(ctx, allocColumns+` WHERE `+where+` ORDER BY created_at DESC, id LIMIT 1000`, args...)
	if err != nil {
		return nil, fmt.Errorf("list allocations: %w", err)
	}
	out, err := pgx.CollectRows(rows, scanAlloc)
	if err != nil {
		return nil, fmt.Errorf("list allocations: %w", err)
	}
	if len(out) == 0 {
		return out, nil
	}
	byID := make(map[string]*api.Allocation, len(out))
	idList := make([]string, len(out))
	for i := range out {
		byID[out[i].ID] = &out[i]
		idList[i] = out[i].ID
		out[i].Project = names[out[i].ProjectID]
	}
	slots, err := node.Slots(ctx, q, `allocation_id = ANY($1)`, idList)
	if err != nil {
		return nil, err
	}
	for _, s := range slots {
		a := byID[s.AllocationID]
		a.Slots = append(a.Slots, s)
	}
	return out, nil
}

// stateEvent is the outbox event for a state change, told to every member
// of the allocation's project.
func stateEvent(ctx context.Context, q store.Querier, a api.Allocation, from string) (outbox.Event, error) {
	users, err := project.MemberIDs(ctx, q, a.ProjectID)
	if err != nil {
		return outbox.Event{}, err
	}
	return outbox.Event{
		Kind: api.EventAllocState, Subject: a.ID, ProjectID: a.ProjectID, Users: users,
		Payload: api.AllocStateChange{From: from, To: a.State, Reason: a.Reason, Allocation: a},
	}, nil
}
