package httpfront

import (
	"context"
	"log/slog"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// zapToSlog is a zap logger writing to log: certmagic logs through zap,
// the gateway through slog.
func zapToSlog(log *slog.Logger) *zap.Logger {
	return zap.New(&slogCore{log: log})
}

// slogCore is a zapcore.Core over an slog.Logger.
type slogCore struct {
	log   *slog.Logger
	attrs []any
}

func slogLevel(l zapcore.Level) slog.Level {
	switch {
	case l >= zapcore.ErrorLevel:
		return slog.LevelError
	case l == zapcore.WarnLevel:
		return slog.LevelWarn
	case l == zapcore.InfoLevel:
		return slog.LevelInfo
	default:
		return slog.LevelDebug
	}
}

func (c *slogCore) Enabled(l zapcore.Level) bool {
	return c.log.Enabled(context.Background(), slogLevel(l))
}

func (c *slogCore) With(fields []zapcore.Field) zapcore.Core {
	return &slogCore{log: c.log, attrs: append(append([]any{}, c.attrs...), fieldAttrs(fields)...)}
}

func (c *slogCore) Check(e zapcore.Entry, ce *zapcore.CheckedEntry) *zapcore.CheckedEntry {
	if c.Enabled(e.Level) {
		return ce.AddCore(e, c)
	}
	return ce
}

func (c *slogCore) Write(e zapcore.Entry, fields []zapcore.Field) error {
	args := append(append([]any{}, c.attrs...), fieldAttrs(fields)...)
	if e.LoggerName != "" {
		args = append(args, "logger", e.LoggerName)
	}
	c.log.Log(context.Background(), slogLevel(e.Level), "acme: "+e.Message, args...)
	return nil
}

func (c *slogCore) Sync() error { return nil }

// fieldAttrs turns zap fields into slog key-value pairs.
func fieldAttrs(fields []zapcore.Field) []any {
	enc := zapcore.NewMapObjectEncoder()
	for _, f := range fields {
		f.AddTo(enc)
	}
	out := make([]any, 0, 2*len(enc.Fields))
	for k, v := range enc.Fields {
		out = append(out, k, v)
	}
	return out
}
