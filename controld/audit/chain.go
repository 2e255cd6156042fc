package audit

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strconv"

	"github.com/jackc/pgx/v5"

	"github.com/gpuaas/gpuaas/internal/api"
)

// Audit rows are hash-chained per stream (migration 0023, docs/audit.md):
// the trigger audit_logs_chain links each row as it is inserted, and
// Verify recomputes every link here, in Go, from the rows' fields.

// RowHash is a row's chain hash, as the database's audit_hash computes it:
// hex SHA-256 over its fields separated by NUL bytes, at in Unix
// microseconds, detail as jsonb's text.
func RowHash(r api.AuditRecord) string {
	h := sha256.New()
	for i, f := range []string{r.PrevHash, strconv.FormatInt(r.StreamSeq, 10), r.Stream,
		strconv.FormatInt(r.At.UnixMicro(), 10), r.Actor, r.Action, r.TargetType, r.TargetID, r.Project,
		r.CorrelationID, r.IdempotencyKey, string(r.Detail)} {
		if i > 0 {
			h.Write([]byte{0})
		}
		h.Write([]byte(f))
	}
	return hex.EncodeToString(h.Sum(nil))
}

// maxProblems bounds what Verify reports: a chain broken early breaks
// every later link of its stream too.
const maxProblems = 100

// Verify recomputes every stream's chain in one repeatable-read snapshot
// (so rows appended meanwhile cannot make a sound trail look broken) and
// names each row whose hash does not match its fields (edited), whose
// seq does not follow (deleted or inserted), or whose prev_hash is not
// the previous row's hash.
func Verify(ctx context.Context, db interface {
	BeginTx(ctx context.Context, opts pgx.TxOptions) (pgx.Tx, error)
}) (*api.AuditVerifyResponse, error) {
	tx, err := db.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly})
	if err != nil {
		return nil, fmt.Errorf("verify audit: %w", err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	rows, err := tx.Query(ctx, `SELECT `+recordColumns+` FROM audit_logs a ORDER BY a.stream, a.seq`)
	if err != nil {
		return nil, fmt.Errorf("verify audit: %w", err)
	}
	out := &api.AuditVerifyResponse{Problems: []api.AuditProblem{}}
	var stream string
	var lastSeq int64
	var lastHash string
	first := true
	var r api.AuditRecord
	_, err = pgx.ForEachRow(rows, recordDest(&r), func() error {
		out.Rows++
		if first || r.Stream != stream {
			stream, lastSeq, lastHash, first = r.Stream, 0, "", false
			out.Streams++
		}
		problem := func(format string, args ...any) {
			if len(out.Problems) < maxProblems {
				out.Problems = append(out.Problems, api.AuditProblem{ID: r.ID, Stream: r.Stream, StreamSeq: r.StreamSeq,
					Problem: fmt.Sprintf("audit row %d (stream %q, seq %d): ", r.ID, r.Stream, r.StreamSeq) +
						fmt.Sprintf(format, args...)})
			}
		}
		if r.Stream != r.Project {
			problem("its stream is not its project's (%q)", r.Project)
		}
		if r.StreamSeq != lastSeq+1 {
			problem("seq follows %d: a row is missing or was inserted", lastSeq)
		}
		if r.PrevHash != lastHash {
			problem("prev_hash %.12s… is not the previous row's hash %.12s…", r.PrevHash, lastHash)
		}
		if got := RowHash(r); got != r.Hash {
			problem("its hash %.12s… does not match its contents (%.12s…): the row was changed", r.Hash, got)
		}
		lastSeq, lastHash = r.StreamSeq, r.Hash
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("verify audit: %w", err)
	}
	out.OK = len(out.Problems) == 0
	return out, nil
}
