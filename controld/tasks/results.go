package tasks

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/gpuaas/gpuaas/controld/store"
	"github.com/gpuaas/gpuaas/internal/api"
)

// lock reads and row-locks a node's task, for a report about it (op
// names the report in errors).
func lock(ctx context.Context, tx pgx.Tx, nodeID, taskID, op string) (allocID *string, typ, state string, err error) {
	err = tx.QueryRow(ctx, `SELECT allocation_id, type, state FROM node_tasks WHERE id = $1 AND node_id = $2 FOR UPDATE`,
		taskID, nodeID).Scan(&allocID, &typ, &state)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, "", "", api.Errorf(api.CodeNotFound, "no task %s for node %s", taskID, nodeID)
	}
	if err != nil {
		return nil, "", "", fmt.Errorf("%s: %w", op, err)
	}
	return allocID, typ, state, nil
}

// RecordProgress adds a phase report to a running task's timeline, in tx.
// It returns the task's allocation ("" for none) and whether the report
// was recorded: a late report of a task already settled is not.
func RecordProgress(ctx context.Context, tx pgx.Tx, nodeID string, p api.TaskProgress, now time.Time) (string, bool, error) {
	allocID, _, state, err := lock(ctx, tx, nodeID, p.TaskID, "progress")
	if err != nil {
		return "", false, err
	}
	if Finished(state) {
		return "", false, nil
	}
	if _, err := tx.Exec(ctx, `INSERT INTO node_task_events (task_id, at, phase, status, elapsed_ms, message)
		VALUES ($1,$2,$3,$4,$5,$6)`, p.TaskID, p.At, p.Phase, p.Status, p.ElapsedMS, p.Message); err != nil {
		return "", false, fmt.Errorf("record progress: %w", err)
	}
	if _, err := tx.Exec(ctx, `UPDATE node_tasks SET state = 'running', phase = $2, updated_at = $3
		WHERE id = $1`, p.TaskID, p.Phase, now); err != nil {
		return "", false, fmt.Errorf("record progress: %w", err)
	}
	if allocID == nil {
		return "", true, nil
	}
	return *allocID, true, nil
}

// Settled is a task whose outcome was just recorded.
type Settled struct {
	Type string
	// Took is the time from the task's creation to its result.
	Took         time.Duration
	AllocationID string // "" for none
}

// Settle records a task's outcome in tx, once: it returns false for a task
// already settled, whose result was applied before. The result's progress
// log, when it has one, becomes the task's timeline.
func Settle(ctx context.Context, tx pgx.Tx, nodeID string, r api.TaskResult, now time.Time) (Settled, bool, error) {
	allocID, typ, state, err := lock(ctx, tx, nodeID, r.TaskID, "settle "+r.TaskID)
	if err != nil {
		return Settled{}, false, err
	}
	if Finished(state) {
		return Settled{}, false, nil
	}
	result := []byte(r.Result)
	if len(result) == 0 {
		result = nil
	}
	var created time.Time
	if err := tx.QueryRow(ctx, `UPDATE node_tasks SET state = $2, result = $3, error = $4, phase = $5,
		finished_at = $6, updated_at = $6 WHERE id = $1 RETURNING created_at`, r.TaskID, r.Status, result, r.Error, r.Phase, now).Scan(&created); err != nil {
		return Settled{}, false, fmt.Errorf("settle %s: %w", r.TaskID, err)
	}
	if err := recordPhases(ctx, tx, r); err != nil {
		return Settled{}, false, err
	}
	s := Settled{Type: typ, Took: now.Sub(created)}
	if allocID != nil {
		s.AllocationID = *allocID
	}
	return s, true, nil
}

// recordPhases makes the result's progress log the task's timeline; live
// reports that raced the result, or were lost, are replaced by it.
func recordPhases(ctx context.Context, tx pgx.Tx, r api.TaskResult) error {
	if len(r.Phases) == 0 {
		return nil
	}
	if _, err := tx.Exec(ctx, `DELETE FROM node_task_events WHERE task_id = $1`, r.TaskID); err != nil {
		return fmt.Errorf("replace timeline: %w", err)
	}
	for _, p := range r.Phases {
		status := p.Status
		if _, err := tx.Exec(ctx, `INSERT INTO node_task_events (task_id, at, phase, status, elapsed_ms, message)
			VALUES ($1,$2,$3,$4,$5,$6)`, r.TaskID, p.At, p.Phase, status, p.ElapsedMS, p.Message); err != nil {
			return fmt.Errorf("record timeline: %w", err)
		}
	}
	return nil
}

// Timeline returns an allocation's host-side progress, oldest first.
func Timeline(ctx context.Context, q store.Querier, allocationID string) ([]api.PhaseTiming, error) {
	rows, err := q.Query(ctx, `SELECT t.type, e.phase, e.status, e.at, e.elapsed_ms, e.message
		FROM node_task_events e JOIN node_tasks t ON t.id = e.task_id
		WHERE t.allocation_id = $1 ORDER BY e.at, e.id`, allocationID)
	if err != nil {
		return nil, fmt.Errorf("timeline: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (api.PhaseTiming, error) {
		var p api.PhaseTiming
		return p, r.Scan(&p.Task, &p.Phase, &p.Status, &p.At, &p.ElapsedMS, &p.Message)
	})
	if err != nil {
		return nil, fmt.Errorf("timeline: %w", err)
	}
	return out, nil
}
