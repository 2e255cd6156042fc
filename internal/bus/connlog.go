package bus

import (
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
)

// LogConnection makes a connection say on log what happens to it: one
// Warn line when it loses its server (the server and the error), one Info
// line when it is back (the server it reconnected to and how long it was
// out), and one line when it closes: Error when it gave up or was refused
// for good, Info for a close the process asked for. Lines carry the
// connection's name, so controld's two connections are told apart.
//
// It keeps the handlers options before it set (a daemon's own reconnect
// handler still runs): pass it after them.
func LogConnection(log *slog.Logger) nats.Option {
	return func(o *nats.Options) error {
		// Until the connection says which server it is on (its connected
		// handler runs asynchronously, maybe after a first loss), name the
		// servers it was given.
		l := &connLog{log: log.With("conn", o.Name), now: time.Now, server: strings.Join(o.Servers, ",")}
		prevConnected, prevDisconnected, prevReconnected, prevClosed :=
			o.ConnectedCB, o.DisconnectedErrCB, o.ReconnectedCB, o.ClosedCB
		o.ConnectedCB = func(nc *nats.Conn) {
			l.connected(nc)
			if prevConnected != nil {
				prevConnected(nc)
			}
		}
		o.DisconnectedErrCB = func(nc *nats.Conn, err error) {
			l.disconnected(nc, err)
			if prevDisconnected != nil {
				prevDisconnected(nc, err)
			}
		}
		// DisconnectedCB is only called when DisconnectedErrCB is not set:
		// keep an older-style handler working.
		if prevDisconnected == nil && o.DisconnectedCB != nil {
			prevOnly := o.DisconnectedCB
			o.DisconnectedErrCB = func(nc *nats.Conn, err error) {
				l.disconnected(nc, err)
				prevOnly(nc)
			}
		}
		o.ReconnectedCB = func(nc *nats.Conn) {
			l.reconnected(nc)
			if prevReconnected != nil {
				prevReconnected(nc)
			}
		}
		o.ClosedCB = func(nc *nats.Conn) {
			l.closed(nc)
			if prevClosed != nil {
				prevClosed(nc)
			}
		}
		return nil
	}
}

// connLog is one connection's log state. nats.go runs a connection's
// handlers one at a time, but Close may race the dispatcher: keep a mutex.
type connLog struct {
	log *slog.Logger
	now func() time.Time

	// mu protects the following.
	mu sync.Mutex
	// server is the server the connection is (or last was) on; nats.go
	// forgets it once the connection is lost.
	server string
	// lostAt is when the connection was lost; zero while connected.
	lostAt time.Time
}

func (l *connLog) connected(nc *nats.Conn) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if u := nc.ConnectedUrlRedacted(); u != "" {
		l.server = u
	}
}

func (l *connLog) disconnected(nc *nats.Conn, err error) {
	if nc.IsClosed() {
		return // a close: closed says it
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.lostAt.IsZero() {
		return // one line per outage: a failed reconnect is no new loss
	}
	l.lostAt = l.now()
	l.log.Warn("nats disconnected", "server", l.server, "err", errText(err))
}

func (l *connLog) reconnected(nc *nats.Conn) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if u := nc.ConnectedUrlRedacted(); u != "" {
		l.server = u
	}
	attrs := []any{"server", l.server}
	if !l.lostAt.IsZero() {
		attrs = append(attrs, "outage", l.now().Sub(l.lostAt).Round(time.Millisecond))
	}
	l.lostAt = time.Time{}
	l.log.Info("nats reconnected", attrs...)
}

func (l *connLog) closed(nc *nats.Conn) {
	l.mu.Lock()
	defer l.mu.Unlock()
	err := nc.LastError()
	attrs := []any{"server", l.server}
	if !l.lostAt.IsZero() {
		attrs = append(attrs, "outage", l.now().Sub(l.lostAt).Round(time.Millisecond))
	}
	if err == nil {
		l.log.Info("nats connection closed", attrs...)
		return
	}
	l.log.Error("nats connection lost", append(attrs, "err", err.Error())...)
}

func errText(err error) string {
	if err == nil {
		return "connection closed by the server"
	}
	return err.Error()
}
