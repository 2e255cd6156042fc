package bus

import (
	"log/slog"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
)

// LogOutages logs a connection's outages: one warning when it loses its
// server, one line when it is connected again, with how long it was
// without one. It keeps the disconnect and reconnect handlers set by the
// options before it: put it last.
func LogOutages(log *slog.Logger) nats.Option {
	return func(o *nats.Options) error {
		if log == nil {
			return nil
		}
		// mu protects since.
		var mu sync.Mutex
		var since time.Time
		prevDown, prevUp := o.DisconnectedErrCB, o.ReconnectedCB
		o.DisconnectedErrCB = func(nc *nats.Conn, err error) {
			mu.Lock()
			first := since.IsZero()
			if first {
				since = time.Now()
			}
			mu.Unlock()
			if first && !nc.IsClosed() {
				log.Warn("nats disconnected; reconnecting", "conn", nc.Opts.Name, "err", err)
			}
			if prevDown != nil {
				prevDown(nc, err)
			}
		}
		o.ReconnectedCB = func(nc *nats.Conn) {
			mu.Lock()
			down := since
			since = time.Time{}
			mu.Unlock()
			if !down.IsZero() {
				log.Info("nats reconnected", "conn", nc.Opts.Name, "server", nc.ConnectedUrlRedacted(),
					"outage", time.Since(down).Round(time.Millisecond))
			}
			if prevUp != nil {
				prevUp(nc)
			}
		}
		return nil
	}
}
