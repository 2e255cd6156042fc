package testutil

import (
	"context"
	"log/slog"
	"os"
	"testing"
)

// BenchLogger is a daemon's logger in a benchmark: through t.Log like
// Logger, but at the daemons' default level (info, `--log-level`) rather
// than debug, so that a request or a task is measured as it runs in
// production, where its debug lines are not written. BENCH_LOG_LEVEL
// (debug, info, warn, error) sets another level.
func BenchLogger(t testing.TB) *slog.Logger {
	t.Helper()
	var level slog.Level
	if err := level.UnmarshalText([]byte(os.Getenv("BENCH_LOG_LEVEL"))); err != nil {
		level = slog.LevelInfo
	}
	return slog.New(minLevel{Handler: Logger(t).Handler(), min: level})
}

// minLevel is a handler that drops what is below min.
type minLevel struct {
	slog.Handler
	min slog.Level
}

func (h minLevel) Enabled(ctx context.Context, l slog.Level) bool {
	return l >= h.min && h.Handler.Enabled(ctx, l)
}

func (h minLevel) WithAttrs(attrs []slog.Attr) slog.Handler {
	return minLevel{Handler: h.Handler.WithAttrs(attrs), min: h.min}
}

func (h minLevel) WithGroup(name string) slog.Handler {
	return minLevel{Handler: h.Handler.WithGroup(name), min: h.min}
}
