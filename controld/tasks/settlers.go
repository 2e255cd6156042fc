package tasks

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/gpuaas/gpuaas/controld/outbox"
	"github.com/gpuaas/gpuaas/internal/hostproto"
)

// Settler applies the outcome of one task type, in the transaction that
// records it (controld/hosts runs that transaction, and writes its audit
// row and outbox events). It changes only what its own domain owns, and
// returns what the outcome changed. It is the other half of hostd's task
// handler (hostd/tasks.Handler): hostd runs a type, a Settler applies
// what came of it.
type Settler func(ctx context.Context, tx pgx.Tx, o Outcome) (Effect, error)

// Outcome is a task just settled and the result that settled it.
type Outcome struct {
	TaskID string
	NodeID string
	// AllocationID is the task's allocation ("" for a node task).
	AllocationID string
	Type         string
	// Result is the node's report (or controld's, for a task refused or
	// past its deadline).
	Result hostproto.TaskResult
	// Now is when the result is applied.
	Now time.Time
}

// Reason is the result's error, prefixed with the phase that failed when
// it names one: what an allocation's state change gives as its reason.
func (o Outcome) Reason() string {
	if o.Result.Phase != "" && o.Result.Error != "" {
		return o.Result.Phase + ": " + o.Result.Error
	}
	return o.Result.Error
}

// Effect is what an outcome changed, beyond its own tables.
type Effect struct {
	// Events are enqueued in the outbox after the task's phases.
	Events []outbox.Event
	// SlotsFreed: slots became free (the queued requests are retried).
	SlotsFreed bool
	// Final, when set, queues the settler's last statements in the round
	// trip that writes the outcome's audit row and outbox rows and
	// commits: statements whose results the settler need not read. One
	// failing there rolls the whole outcome back, as any error of the
	// settler does.
	Final func(b *pgx.Batch)
}

// Settlers maps task types to the settlers that apply their outcomes, as
// hostd/tasks.Registry maps them to handlers. Each domain package that
// enqueues a type returns its settlers (alloc.Settlers, node.Settlers);
// controld.New joins them.
type Settlers map[string]Settler

// JoinSettlers joins the settlers of several domains. A type two of them
// claim is an error: only one owner may apply an outcome.
func JoinSettlers(parts ...Settlers) (Settlers, error) {
	out := Settlers{}
	for _, p := range parts {
		for typ, s := range p {
			if s == nil {
				return nil, fmt.Errorf("join settlers: %s has a nil settler", typ)
			}
			if _, dup := out[typ]; dup {
				return nil, fmt.Errorf("join settlers: %s is settled twice", typ)
			}
			out[typ] = s
		}
	}
	return out, nil
}
