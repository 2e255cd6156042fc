package controld_test

import (
	"context"
	"log/slog"
	"os"
	"testing"

	"github.com/gpuaas/gpuaas/internal/testutil"
)

// benchLogger is controld's logger in the API benchmarks: through t.Log
// like the tests', but at the daemon's default level (info, `--log-level`)
// rather than debug, so that a read is measured as it runs in production,
// where its request line is not written. BENCH_LOG_LEVEL=debug writes
// every request's line, as the tests do.
func benchLogger(b *testing.B) *slog.Logger {
	b.Helper()
	var level slog.Level
	if err := level.UnmarshalText([]byte(os.Getenv("BENCH_LOG_LEVEL"))); err != nil {
		level = slog.LevelInfo
	}
	return slog.New(minLevel{Handler: testutil.Logger(b).Handler(), min: level})
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
