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

// Task is a task to queue for a node.
type Task struct {
	NodeID       string
	AllocationID string
	Type         string
	Params       any
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
