package controld

import (
	"bytes"
	"context"
	"log/slog"
	"testing"

	"github.com/gpuaas/gpuaas/internal/corrid"
)

// textLogger writes lines without their time, so two loggers' lines can
// be compared.
func textLogger(buf *bytes.Buffer, level slog.Level) *slog.Logger {
	return slog.New(slog.NewTextHandler(buf, &slog.HandlerOptions{Level: level,
		ReplaceAttr: func(groups []string, a slog.Attr) slog.Attr {
			if len(groups) == 0 && a.Key == slog.TimeKey {
				return slog.Attr{}
			}
			return a
		}}))
}

// TestCorrLoggerWritesWhatWithWrote: a request's logger writes the same
// lines as log.With(corrid.Key, corr) did — the id first, before the
// line's attributes, outside groups — through Warn, LogAttrs, With and
// WithGroup, and nothing below the handler's level.
func TestCorrLoggerWritesWhatWithWrote(t *testing.T) {
	lines := func(l *slog.Logger) string {
		l.Warn("correlation id replaced", "endpoint", "alloc.get", "sent_len", 99)
		l.LogAttrs(context.Background(), slog.LevelInfo, "request", slog.String("endpoint", "alloc.get"),
			slog.String("code", "ok"))
		l.Debug("request", "endpoint", "alloc.get") // below the level: not written
		l.With("task", "t-1").Info("queued", "node", "n-1")
		l.WithGroup("g").Info("grouped", "k", "v")
		l.With("a", 1).WithGroup("g").With("b", 2).Error("nested", "c", 3)
		return ""
	}
	var want, got bytes.Buffer
	lines(textLogger(&want, slog.LevelInfo).With(corrid.Key, "c-42"))
	lines(corrLogger(textLogger(&got, slog.LevelInfo), "c-42"))
	if got.String() != want.String() {
		t.Fatalf("lines differ from With's:\n got: %s\nwant: %s", got.String(), want.String())
	}
	if !bytes.Contains(got.Bytes(), []byte("corr=c-42 endpoint=alloc.get")) {
		t.Fatalf("the id is not first among the attributes: %s", got.String())
	}
}

// TestCorrLoggerCostsLittleWhenNothingIsLogged: making a request's logger
// and skipping its read line (debug, with the daemon at info) allocates
// the handler and the logger only — Logger.With formatted the id into a
// copy of the handler on every request.
func TestCorrLoggerCostsLittleWhenNothingIsLogged(t *testing.T) {
	base := textLogger(&bytes.Buffer{}, slog.LevelInfo)
	ctx := context.Background()
	allocs := testing.AllocsPerRun(200, func() {
		l := corrLogger(base, "c-42")
		if l.Enabled(ctx, slog.LevelDebug) {
			t.Fatal("debug enabled at info")
		}
	})
	if allocs > 2 {
		t.Fatalf("a request's logger costs %.0f allocations, want at most 2", allocs)
	}
}
