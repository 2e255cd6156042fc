package controld

import (
	"context"
	"errors"
	"time"
)

// errStoppedByItself is a supervised loop that returned nil before its
// context ended.
var errStoppedByItself = errors.New("stopped by itself")

// Backoff of supervise between restarts of a loop.
const (
	superviseMinBackoff = 100 * time.Millisecond
	superviseMaxBackoff = 2 * time.Second
	// superviseHealthy is how long a restarted run must last to count as
	// recovered: the outage's end is logged then, and its next failure is
	// a new outage, logged again.
	superviseHealthy = 2 * time.Second
)

// supervise runs a background loop until ctx ends, restarting it with
// backoff when it fails (a Postgres restart ends the relay's session and
// its lock; a NATS restart can stop a JetStream consumer) instead of
// taking the whole replica down. It logs one line when an outage starts
// and one when the loop has run for superviseHealthy again, with the
// outage's duration (to the start of the run that held).
func (s *Server) supervise(ctx context.Context, name string, run func(context.Context) error) error {
	backoff := superviseMinBackoff
	var outage time.Time
	for {
		start := time.Now()
		var recovered *time.Timer
		if !outage.IsZero() {
			lasted := start.Sub(outage).Round(time.Millisecond)
			recovered = time.AfterFunc(superviseHealthy, func() {
				s.cfg.Log.Info(name+" recovered", "outage", lasted)
			})
		}
		err := run(ctx)
		healthy := time.Since(start) >= superviseHealthy
		if recovered != nil && !recovered.Stop() {
			healthy = true // its recovery was logged: a failure now is a new outage
		}
		if ctx.Err() != nil {
			return nil
		}
		if err == nil {
			// A loop returns nil only when ctx ends; one that stops by
			// itself is restarted all the same.
			err = errStoppedByItself
		}
		if healthy {
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
