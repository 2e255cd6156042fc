package alloc

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/gpuaas/gpuaas/controld/audit"
	"github.com/gpuaas/gpuaas/controld/billing"
	"github.com/gpuaas/gpuaas/controld/catalog"
	"github.com/gpuaas/gpuaas/controld/mutate"
	"github.com/gpuaas/gpuaas/controld/node"
	"github.com/gpuaas/gpuaas/controld/outbox"
	"github.com/gpuaas/gpuaas/controld/project"
	"github.com/gpuaas/gpuaas/controld/sched"
	"github.com/gpuaas/gpuaas/controld/tasks"
	"github.com/gpuaas/gpuaas/controld/volumes"
	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/ids"
)

// Create validates req, inserts the allocation and places it in tx. When
// the project's balance does not last rules.MinRunway at its total burn
// with this allocation, it fails with insufficient_funds
// (*InsufficientFundsError) and changes nothing, queued or not; over a
// budget of the project or of the actor in it, with budget_exceeded
// (*BudgetExceededError, see CheckBudgets), likewise. When
// nothing fits, it fails with no_capacity and changes nothing, unless
// req.Queue asks to wait in the SKU's FIFO queue; insufficient_funds and
// budget_exceeded come first when they apply too. A placed allocation is
// provisioning, with its provisioning task queued for the node.
//
// The funds and budgets are checked last, under the project's funds lock
// held from the transaction's final round trip to its COMMIT: Create
// places first and returns the check as the effect's Final, which
// mutate.Runner queues ahead of the audit, outbox and idempotency rows
// in that round trip (fundslast.go; docs/decisions/0042-funds-lock-last.md).
// A caller running Create outside mutate.Runner must run eff.Final itself.
func Create(ctx context.Context, tx pgx.Tx, actor Actor, req api.AllocCreateRequest, rules Rules, now time.Time) (api.Allocation, mutate.Effect, error) {
	var eff mutate.Effect
	p, sku, err := checkCreate(ctx, tx, actor, req)
	if err != nil {
		return api.Allocation{}, eff, err
	}
	fc := &fundsCheck{projectID: p.ID, projectName: p.Name, userID: actor.UserID, sku: sku, gpus: req.GPUs, rules: rules, now: now}
	var members []string
	var budgets []billing.Budget
	a, placed, claim, err := insertAndPlace(ctx, tx, p, sku, actor, req, now, &members, &budgets)
	if err != nil {
		return api.Allocation{}, eff, fc.refusalOrder(ctx, tx, err)
	}
	fc.allocID, fc.placed, fc.budgetsSeen = a.ID, placed, len(budgets) > 0
	from := api.AllocRequested
	if !placed {
		if _, err := tx.Exec(ctx, `UPDATE allocations SET queued = true WHERE id = $1`, a.ID); err != nil {
			return api.Allocation{}, eff, fmt.Errorf("queue allocation: %w", err)
		}
		a.Queued, a.Reason = true, "waiting for capacity"
		servers, err := node.CouldServe(ctx, tx, sku.Shape, sku.GPUModel, a.GPUs)
		if err != nil {
			return api.Allocation{}, eff, err
		}
		if servers == 0 {
			// Queued all the same (an operator may be adding the host),
			// but not silently.
			a.Note = fmt.Sprintf("no host serves %d × %s now: the request waits until an operator adds one "+
				"(`gpuaas catalog list --available` shows what can be rented now; `gpuaas alloc release %s` cancels it)", a.GPUs, sku.ID, a.ID)
		}
	}
	ev := eventTo(members, a, from)
	eff.Audit = audit.Entry{Action: "alloc.create", TargetType: "allocation", TargetID: a.ID, ProjectID: a.ProjectID,
		Detail: map[string]any{"sku": a.SKU, "gpus": a.GPUs, "queued": a.Queued, "node_id": a.NodeID}}
	eff.Events = []outbox.Event{ev}
	if placed {
		attached, err := volumes.Attach(ctx, tx, claim, a.ID, now)
		if err != nil {
			return api.Allocation{}, eff, err
		}
		eff.Events = append(eff.Events, attached...)
	}
	eff.Final = fc.final
	return a, eff, nil
}

// insertAndPlace claims the volumes req mounts, inserts the allocation
// and places it; placed is false when nothing fits and req.Queue asks to
// wait (no_capacity otherwise).
func insertAndPlace(ctx context.Context, tx pgx.Tx, p api.Project, sku api.SKU, actor Actor, req api.AllocCreateRequest,
	now time.Time, members *[]string, budgets *[]billing.Budget) (a api.Allocation, placed bool, claim volumes.Claim, err error) {
	if claim, err = claimVolumes(ctx, tx, p.ID, sku, req, now); err != nil {
		return a, false, claim, err
	}
	if a, err = insertRequested(ctx, tx, p, sku, actor, req.GPUs, now, members, budgets); err != nil {
		return a, false, claim, err
	}
	placed, err = placeWith(ctx, tx, &a, sku, actor.UserID, claim, now)
	switch {
	case err != nil:
		return a, false, claim, err
	case !placed && !req.Queue:
		return a, false, claim, api.Errorf(api.CodeNoCapacity, "no capacity for %d × %s right now", a.GPUs, sku.ID).
			WithHint("add --queue to wait in line for capacity, or pick another SKU (`gpuaas catalog list`)")
	}
	return a, placed, claim, nil
}

// checkCreate is the validation Create and Quote share: a SKU on offer in
// a GPU count it comes in, in a project the actor may create in.
func checkCreate(ctx context.Context, tx pgx.Tx, actor Actor, req api.AllocCreateRequest) (api.Project, api.SKU, error) {
	if req.SKU == "" {
		return api.Project{}, api.SKU{}, api.Errorf(api.CodeInvalidArgument, "no SKU given").WithHint("see `gpuaas catalog list`")
	}
	// The project, the actor's role in it and the SKU are read in one
	// round trip; they are then checked in the order they were read one
	// by one (project errors first, then the SKU's).
	b := &pgx.Batch{}
	var auth project.Authorization
	project.QueueAuthorize(b, &auth, req.Project, actor.UserID)
	var sl catalog.Lookup
	catalog.QueueGet(b, &sl, req.SKU)
	if err := tx.SendBatch(ctx, b).Close(); err != nil {
		return api.Project{}, api.SKU{}, err
	}
	p, err := auth.Check(ctx, tx, actor.Role, project.AccessWrite)
	if err != nil {
		return api.Project{}, api.SKU{}, err
	}
	sku, err := sl.Result(ctx, tx)
	if err != nil {
		return api.Project{}, api.SKU{}, err
	}
	if err := catalog.CheckGPUs(sku, req.GPUs); err != nil {
		return api.Project{}, api.SKU{}, err
	}
	return p, sku, nil
}

// insertRequested inserts a new allocation in state requested. With
// members non-nil, the ids of the project's members (whom its state
// events go to, stateEvent) are read in the same round trip; with
// budgets non-nil, the budgets binding the actor in the project (whether
// the funds check must wait for a budget check, fundsCheck.final).
func insertRequested(ctx context.Context, tx pgx.Tx, p api.Project, sku api.SKU, actor Actor, gpus int, now time.Time,
	members *[]string, budgets *[]billing.Budget) (api.Allocation, error) {
	a := api.Allocation{
		ID: ids.New(ids.Allocation), ProjectID: p.ID, UserID: actor.UserID, SKU: sku.ID, Shape: sku.Shape,
		GPUs: gpus, State: api.AllocRequested, Version: 1, Slots: []api.Slot{}, CreatedAt: now, UpdatedAt: now,
	}
	b := &pgx.Batch{}
	b.Queue(`INSERT INTO allocations (id, project_id, user_id, sku_id, shape, gpus, state, version, queued, created_at, updated_at)
		VALUES ($1,$2,$3,$4,$5,$6,'requested',1,false,$7,$7)`, a.ID, a.ProjectID, a.UserID, a.SKU, a.Shape, a.GPUs, now).
		Exec(func(pgconn.CommandTag) error { return nil })
	if members != nil {
		// project.MemberIDs's read, queued (alloc reads project_members:
		// controld/ownership_test.go).
		b.Queue(`SELECT user_id FROM project_members WHERE project_id=$1 ORDER BY user_id`, p.ID).Query(func(rows pgx.Rows) error {
			ids, err := pgx.CollectRows(rows, pgx.RowTo[string])
			*members = ids
			return err
		})
	}
	if budgets != nil {
		billing.QueueBudgetsFor(b, budgets, p.ID, actor.UserID)
	}
	if err := tx.SendBatch(ctx, b).Close(); err != nil {
		return api.Allocation{}, fmt.Errorf("insert allocation: %w", err)
	}
	return a, nil
}

// place tries to reserve slots for a requested allocation; on success it
// moves it to provisioning and queues the provisioning task. It reports
// false (and changes nothing) when there is no capacity.
func place(ctx context.Context, tx pgx.Tx, a *api.Allocation, sku api.SKU, actor string, now time.Time) (bool, error) {
	return placeWith(ctx, tx, a, sku, actor, volumes.Claim{}, now)
}

// placeWith is place on the node of the claimed volumes, when there are
// any, which the provisioning mounts; no capacity there is an error that
// says why, not a request to queue (volumes.go).
func placeWith(ctx context.Context, tx pgx.Tx, a *api.Allocation, sku api.SKU, actor string, claim volumes.Claim, now time.Time) (bool, error) {
	pl, err := sched.Place(ctx, tx, sched.Request{AllocationID: a.ID, Shape: sku.Shape, GPUModel: sku.GPUModel, GPUs: a.GPUs,
		NodeID: claim.NodeID})
	if sched.IsNoCapacity(err) && claim.NodeID == "" {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	// The node, the transition and the task go in one round trip: the
	// allocation was inserted (Create) or locked (the queue) by this
	// transaction, and an error rolls it (or the savepoint) back.
	b := &pgx.Batch{}
	b.Queue(`UPDATE allocations SET node_id = $2 WHERE id = $1`, a.ID, pl.NodeID).Fn = func(br pgx.BatchResults) error {
		if _, err := br.Exec(); err != nil {
			return fmt.Errorf("assign node: %w", err)
		}
		return nil
	}
	from, to, reason := a.State, api.AllocProvisioning, "slots reserved on "+pl.NodeID
	if err := queueTransition(b, a, to, reason, actor, now); err != nil {
		return false, err
	}
	task := sched.ProvisionTask(a.Shape, pl.NodeID, sched.Environment{AllocationID: a.ID, UserID: a.UserID,
		Slots: pl.Slots, VCPUs: sku.VCPUsPerGPU * a.GPUs, MemoryMiB: sku.MemoryMiBPerGPU * a.GPUs, Image: sku.Image,
		Volumes: claim.Attachments})
	if _, err := tasks.QueueEnqueue(ctx, b, task, now); err != nil {
		return false, err
	}
	if err := tx.SendBatch(ctx, b).Close(); err != nil {
		return false, err
	}
	a.NodeID, a.Slots = pl.NodeID, pl.Slots
	transitioned(a, to, reason, now)
	return true, meter(ctx, tx, a, from, to, now)
}

// eventTo is stateEvent with the project's member ids already read
// (users): the event Create's transition sends.
func eventTo(users []string, a api.Allocation, from string) outbox.Event {
	return outbox.Event{
		Kind: api.EventAllocState, Subject: a.ID, ProjectID: a.ProjectID, Users: users,
		Payload: api.AllocStateChange{From: from, To: a.State, Reason: a.Reason, Allocation: a},
	}
}
