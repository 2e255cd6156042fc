package gate

import (
	"context"
	"errors"

	"github.com/jackc/pgx/v5"

	"github.com/gpuaas/gpuaas/controld/audit"
	"github.com/gpuaas/gpuaas/controld/endpoint"
	"github.com/gpuaas/gpuaas/internal/api"
)

// audited runs a gateway query in a transaction that also writes its audit
// row, so no credential leaves controld without a trace. These calls mint
// short-lived credentials but change no domain state, so they are queries:
// no Idempotency-Key, and a retry simply mints afresh. fn fills the entry
// even when it refuses; a refusal is then audited on its own (the
// transaction holding the attempt is rolled back).
func audited[Resp any](ctx context.Context, d Deps, r *endpoint.Request, fn func(ctx context.Context, tx pgx.Tx, e *audit.Entry) (*Resp, error)) (*Resp, error) {
	var resp *Resp
	err := d.AuditedTx(ctx, r, func(ctx context.Context, tx pgx.Tx, e *audit.Entry) error {
		var err error
		resp, err = fn(ctx, tx, e)
		return err
	})
	return resp, err
}

// AuditedTx is audited for a handler that keeps its own answer (a
// domain's: volumesapi.Audited, exposures' expose.link).
func (d Deps) AuditedTx(ctx context.Context, r *endpoint.Request, fn func(ctx context.Context, tx pgx.Tx, e *audit.Entry) error) error {
	var e audit.Entry
	meta := audit.Meta{ActorID: r.Principal.UserID, CorrelationID: r.Corr}
	err := pgx.BeginFunc(ctx, d.DB, func(tx pgx.Tx) error {
		if err := fn(ctx, tx, &e); err != nil {
			return err
		}
		meta.At = d.Now()
		return audit.Write(ctx, tx, meta, e)
	})
	var apiErr *api.Error
	if err != nil && errors.As(err, &apiErr) && e.Action != "" {
		meta.At = d.Now()
		e.Action += "_refused"
		e.Detail = map[string]any{"request": e.Detail, "code": apiErr.Code, "message": apiErr.Message}
		if werr := audit.Write(ctx, d.DB, meta, e); werr != nil {
			d.Log.Warn("audit refusal", "action", e.Action, "err", werr)
		}
	}
	return err
}
