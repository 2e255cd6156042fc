package controld

import (
	"context"
	"log/slog"

	"github.com/gpuaas/gpuaas/internal/corrid"
)

// corrLogger is log.With(corrid.Key, corr) at the price of one small
// handler: Logger.With formats the attribute into a copy of the handler
// on every request, logged or not, and most requests log nothing (a read's
// line is at debug). corrHandler adds the attribute only to the lines
// that are written, in the place With would have put it (before the
// line's own attributes).
func corrLogger(log *slog.Logger, corr string) *slog.Logger {
	return slog.New(&corrHandler{next: log.Handler(), corr: corr})
}

// corrHandler is a handler with the correlation id attribute pending.
type corrHandler struct {
	next slog.Handler
	corr string
}

func (h *corrHandler) attr() slog.Attr { return slog.String(corrid.Key, h.corr) }

// Enabled is next's: the attribute changes no level.
func (h *corrHandler) Enabled(ctx context.Context, l slog.Level) bool { return h.next.Enabled(ctx, l) }

// Handle writes r with the correlation id first among its attributes.
func (h *corrHandler) Handle(ctx context.Context, r slog.Record) error {
	out := slog.NewRecord(r.Time, r.Level, r.Message, r.PC)
	out.AddAttrs(h.attr())
	r.Attrs(func(a slog.Attr) bool {
		out.AddAttrs(a)
		return true
	})
	return h.next.Handle(ctx, out)
}

// WithAttrs is With on a logger that has the attribute: it comes first.
func (h *corrHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	return h.next.WithAttrs(append([]slog.Attr{h.attr()}, attrs...))
}

// WithGroup keeps the attribute outside the group, as With would have.
func (h *corrHandler) WithGroup(name string) slog.Handler {
	return h.next.WithAttrs([]slog.Attr{h.attr()}).WithGroup(name)
}
