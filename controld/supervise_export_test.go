package controld

import (
	"context"
	"log/slog"
)

// Supervise runs run under the supervisor of controld's background loops,
// logging to log.
func Supervise(ctx context.Context, log *slog.Logger, name string, run func(context.Context) error) error {
	s := &Server{cfg: Config{Log: log}}
	return s.supervise(ctx, name, run)
}
