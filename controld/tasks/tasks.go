// Package tasks owns node_tasks, the durable queue of work for hostd.
// Domain code enqueues tasks in the transaction of the change that needs
// them; the dispatcher (built with hostd) delivers them.
package tasks

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/gpuaas/gpuaas/controld/store"
	"github.com/gpuaas/gpuaas/internal/ids"
)

// Task states.
const (
	StatePending   = "pending"
	StateSucceeded = "succeeded"
	StateFailed    = "failed"
)

// Task is a row of node_tasks.
type Task struct {
	ID           string
	NodeID       string
	AllocationID string
	Type         string
	Params       any
	State        string
	CreatedAt    time.Time
}

// Enqueue inserts a pending task and returns its id.
func Enqueue(ctx context.Context, q store.Querier, t Task, now time.Time) (string, error) {
	params := []byte("{}")
	if t.Params != nil {
		var err error
		if params, err = json.Marshal(t.Params); err != nil {
			return "", fmt.Errorf("task params: %w", err)
		}
	}
	id := ids.New(ids.Task)
	var alloc *string
	if t.AllocationID != "" {
		alloc = &t.AllocationID
	}
	if _, err := q.Exec(ctx, `INSERT INTO node_tasks (id, node_id, allocation_id, type, params, state, created_at, updated_at)
		VALUES ($1,$2,$3,$4,$5,'pending',$6,$6)`, id, t.NodeID, alloc, t.Type, params, now); err != nil {
		return "", fmt.Errorf("enqueue %s for %s: %w", t.Type, t.NodeID, err)
	}
	return id, nil
}

// ForAllocation lists an allocation's tasks, oldest first.
func ForAllocation(ctx context.Context, q store.Querier, allocationID string) ([]Task, error) {
	rows, err := q.Query(ctx, `SELECT id, node_id, type, state, created_at FROM node_tasks
		WHERE allocation_id = $1 ORDER BY created_at, id`, allocationID)
	if err != nil {
		return nil, fmt.Errorf("list tasks: %w", err)
	}
	defer rows.Close()
	var out []Task
	for rows.Next() {
		t := Task{AllocationID: allocationID}
		if err := rows.Scan(&t.ID, &t.NodeID, &t.Type, &t.State, &t.CreatedAt); err != nil {
			return nil, fmt.Errorf("list tasks: %w", err)
		}
		out = append(out, t)
	}
	return out, rows.Err()
}
