package controld

import (
	"context"
	"time"
)

// Backoff of supervise between restarts of a loop.
const (
	superviseMinBackoff = 100 * time.Millisecond
	superviseMaxBackoff = 5 * time.Second
	// superviseHealthy is how long a run must last to count as recovered:
	// its next failure is a new outage, logged again.
	superviseHealthy = 10 * time.Second
)

// supervise runs a background loop until ctx ends, restarting it with
// backoff when it fails (a Postgres restart ends the relay's session and
// its lock) instead of taking the whole replica down. It logs once per
// outage, and when the loop has run for a while again.
func (s *Server) supervise(ctx context.Context, name string, run func(context.Context) error) error {
	backoff := superviseMinBackoff
	var outage time.Time
	for {
		start := time.Now()
		err := run(ctx)
		if ctx.Err() != nil || err == nil {
			return nil
		}
		if time.Since(start) >= superviseHealthy {
			if !outage.IsZero() {
				s.cfg.Log.Info(name+" recovered", "outage", start.Sub(outage).Round(time.Millisecond))
			}
			outage, backoff = time.Time{}, superviseMinBackoff
		}
		if outage.IsZero() {
			outage = time.Now()
			s.cfg.Log.Warn(name+" failed; restarting it until it runs", "err", err)
		} else {
			s.cfg.Log.Debug(name+" failed again", "err", err, "since", time.Since(outage).Round(time.Millisecond))
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, superviseMaxBackoff)
	}
}
