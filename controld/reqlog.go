package controld

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/nats-io/nats.go/micro"

	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/corrid"
)

// newCall reads a request's headers. The correlation id is the caller's
// choice, so it is only logged, and only when it is short and plain
// (corrid.Valid); anything else is replaced — never logged raw — and the
// replacement is said once, on the request's own line.
func (s *Server) newCall(req micro.Request, endpoint string) *call {
	sent := req.Headers().Get(api.HeaderCorrelationID)
	corr, replaced := corrid.Sanitize(sent)
	c := &call{req: req, project: req.Headers().Get(api.HeaderProject), corr: corr,
		log: corrLogger(s.cfg.Log, corr), sourceOf: s.sourceLookup(req)}
	if replaced {
		c.log.Warn("correlation id replaced: not 1-64 letters, digits or -_.:", "endpoint", endpoint, "sent_len", len(sent))
	}
	return c
}

// logRequest writes the request's line: at info for mutations (they
// carry an Idempotency-Key) and refusals, at debug for reads, which
// dashboards and watchers repeat.
func logRequest(ctx context.Context, c *call, endpoint string, start time.Time, err error) {
	level := slog.LevelDebug
	if err != nil || c.req.Headers().Get(api.HeaderIdempotencyKey) != "" {
		level = slog.LevelInfo
	}
	if !c.log.Enabled(ctx, level) {
		return
	}
	attrs := []slog.Attr{slog.String("endpoint", endpoint), slog.Duration("took", time.Since(start))}
	if c.principal != nil {
		attrs = append(attrs, slog.String("actor", c.principal.UserID))
	}
	var e *api.Error
	switch {
	case err == nil:
		attrs = append(attrs, slog.String("code", "ok"))
	case errors.As(err, &e):
		attrs = append(attrs, slog.String("code", string(e.Code)))
	default:
		attrs = append(attrs, slog.String("code", string(api.CodeInternal)))
	}
	c.log.LogAttrs(ctx, level, "request", attrs...)
}
