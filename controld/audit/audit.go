// Package audit owns audit_logs. Every privileged mutation writes exactly
// one row, in the same transaction as its effect.
package audit

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/gpuaas/gpuaas/controld/store"
)

// Entry is what a mutation records about itself.
type Entry struct {
	Action     string // "alloc.create"
	TargetType string // "allocation"
	TargetID   string
	ProjectID  string
	Detail     any
}

// Meta is who did it and how it can be traced.
type Meta struct {
	At             time.Time
	ActorID        string
	CorrelationID  string
	IdempotencyKey string
}

// Write inserts one audit row.
func Write(ctx context.Context, q store.Querier, m Meta, e Entry) error {
	args, err := writeArgs(m, e)
	if err != nil {
		return err
	}
	if _, err := q.Exec(ctx, writeSQL, args...); err != nil {
		return fmt.Errorf("write audit %s: %w", e.Action, err)
	}
	return nil
}

// QueueWrite queues Write's insert in b, so that a mutation's trailing
// rows (audit, outbox, idempotency record) go in one round trip; its
// error comes back when the batch's results are read.
func QueueWrite(b *pgx.Batch, m Meta, e Entry) error {
	args, err := writeArgs(m, e)
	if err != nil {
		return err
	}
	// Fn rather than Exec(fn): Exec's callback sees only successes, and a
	// failed insert is named the way Write names it.
	b.Queue(writeSQL, args...).Fn = func(br pgx.BatchResults) error {
		if _, err := br.Exec(); err != nil {
			return fmt.Errorf("write audit %s: %w", e.Action, err)
		}
		return nil
	}
	return nil
}

const writeSQL = `INSERT INTO audit_logs
		(at, actor_id, action, target_type, target_id, project_id, correlation_id, idempotency_key, detail)
		VALUES ($1,$2,$3,$4,$5,$6,$7,$8,$9)`

func writeArgs(m Meta, e Entry) ([]any, error) {
	detail := []byte("{}")
	if e.Detail != nil {
		var err error
		if detail, err = json.Marshal(e.Detail); err != nil {
			return nil, fmt.Errorf("audit detail: %w", err)
		}
	}
	var project *string
	if e.ProjectID != "" {
		project = &e.ProjectID
	}
	return []any{m.At, m.ActorID, e.Action, e.TargetType, e.TargetID, project, m.CorrelationID, m.IdempotencyKey, detail}, nil
}
