package audit

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/gpuaas/gpuaas/controld/store"
	"github.com/gpuaas/gpuaas/internal/api"
)

// recordColumns reads an api.AuditRecord (recordDest) from audit_logs a;
// the actor's name is its user's email, or "token NAME" for a token.
const recordColumns = `a.id, a.at, a.actor_id,
	coalesce((SELECT CASE u.provider WHEN 'token' THEN 'token ' || u.name ELSE u.email END FROM users u WHERE u.id = a.actor_id), ''),
	a.action, a.target_type, a.target_id, coalesce(a.project_id, ''), a.correlation_id, a.idempotency_key,
	a.detail::text, a.stream, a.seq, a.prev_hash, a.hash`

func recordDest(r *api.AuditRecord) []any {
	return []any{&r.ID, &r.At, &r.Actor, &r.ActorName, &r.Action, &r.TargetType, &r.TargetID, &r.Project,
		&r.CorrelationID, &r.IdempotencyKey, (*textJSON)(&r.Detail), &r.Stream, &r.StreamSeq, &r.PrevHash, &r.Hash}
}

// textJSON scans jsonb's text into a json.RawMessage byte for byte, so
// that the hash reads exactly what the database hashed.
type textJSON []byte

// Scan implements sql.Scanner.
func (t *textJSON) Scan(src any) error {
	switch v := src.(type) {
	case string:
		*t = append((*t)[:0], v...)
	case []byte:
		*t = append((*t)[:0], v...)
	default:
		return fmt.Errorf("audit detail: unexpected %T", src)
	}
	return nil
}

// Filter selects audit rows: Streams nil is every stream.
type Filter struct {
	Streams []string
	Since   time.Time
	Actor   string // id or email
	Action  string // exact, or a prefix ending in "*"
	Target  string // target id, or "type:id"
	After   int64
	Newest  bool
	Limit   int
}

// List returns a page of rows matching f, oldest first, and whether
// there are more after it.
func List(ctx context.Context, q store.Querier, f Filter) ([]api.AuditRecord, bool, error) {
	if f.Limit <= 0 || f.Limit > api.AuditPageMax {
		f.Limit = api.AuditPageMax
	}
	var where []string
	var args []any
	arg := func(v any) string { args = append(args, v); return fmt.Sprintf("$%d", len(args)) }
	if f.Streams != nil {
		where = append(where, "a.stream = ANY("+arg(f.Streams)+")")
	}
	if !f.Since.IsZero() {
		where = append(where, "a.at >= "+arg(f.Since))
	}
	if f.Actor != "" {
		p := arg(f.Actor)
		where = append(where, "(a.actor_id = "+p+" OR a.actor_id IN (SELECT id FROM users WHERE lower(email) = lower("+p+")))")
	}
	if prefix, ok := strings.CutSuffix(f.Action, "*"); ok {
		where = append(where, "starts_with(a.action, "+arg(prefix)+")")
	} else if f.Action != "" {
		where = append(where, "a.action = "+arg(f.Action))
	}
	if f.Target != "" {
		p := arg(f.Target)
		where = append(where, "(a.target_id = "+p+" OR a.target_type || ':' || a.target_id = "+p+")")
	}
	if f.After > 0 {
		where = append(where, "a.id > "+arg(f.After))
	}
	sql := `SELECT ` + recordColumns + ` FROM audit_logs a`
	if len(where) > 0 {
		sql += " WHERE " + strings.Join(where, " AND ")
	}
	order := " ORDER BY a.id"
	if f.Newest {
		order = " ORDER BY a.id DESC"
	}
	rows, err := q.Query(ctx, sql+order+" LIMIT "+arg(f.Limit+1), args...)
	if err != nil {
		return nil, false, fmt.Errorf("list audit: %w", err)
	}
	var r api.AuditRecord
	out := []api.AuditRecord{}
	_, err = pgx.ForEachRow(rows, recordDest(&r), func() error {
		c := r
		c.Detail = append([]byte(nil), r.Detail...)
		out = append(out, c)
		return nil
	})
	if err != nil {
		return nil, false, fmt.Errorf("list audit: %w", err)
	}
	more := len(out) > f.Limit
	if more {
		out = out[:f.Limit]
	}
	if f.Newest {
		for i, j := 0, len(out)-1; i < j; i, j = i+1, j-1 {
			out[i], out[j] = out[j], out[i]
		}
		more = false // the newest page is the last
	}
	return out, more, nil
}
