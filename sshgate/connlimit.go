package sshgate

import (
	"errors"
	"log/slog"
	"net"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/time/rate"
)

// ConnLimit bounds the connections one client address may open: Rate new
// connections a second in bursts of Burst, and at most MaxOpen open at
// once. A connection over the limit is closed as it is accepted, before
// any key exchange, so a flood from one address costs the gateway almost
// nothing and leaves room for everyone else. Connections from loopback are
// not limited (gpuaas dev, a proxy on the machine). Behind a TCP load
// balancer every connection comes from the balancer's address: turn the
// limit off (Rate < 0) and limit at the balancer.
type ConnLimit struct {
	Rate    float64
	Burst   int
	MaxOpen int
}

// Defaults of ConnLimit: a person's ssh, scp and rsync, and a CI runner's
// parallel jobs, stay far below them.
const (
	DefaultConnRate    = 10
	DefaultConnBurst   = 50
	DefaultConnMaxOpen = 256
)

func (l *ConnLimit) checkAndSetDefaults() error {
	if l.Rate == 0 {
		l.Rate = DefaultConnRate
	}
	if l.Burst == 0 {
		l.Burst = DefaultConnBurst
	}
	if l.MaxOpen == 0 {
		l.MaxOpen = DefaultConnMaxOpen
	}
	if l.Rate > 0 && (l.Burst < 1 || l.MaxOpen < 1) {
		return errors.New("sshgate config: connection limit needs a burst and a maximum of at least 1")
	}
	return nil
}

// limitedListener applies a ConnLimit to what ln accepts.
type limitedListener struct {
	net.Listener
	cfg     ConnLimit
	now     func() time.Time
	refused *prometheus.CounterVec // reason
	log     *slog.Logger

	// mu protects the following.
	mu        sync.Mutex
	sources   map[string]*sourceConns
	lastSweep time.Time
	lastLog   time.Time
}

// sourceConns is one address's bucket and open connections.
type sourceConns struct {
	bucket *rate.Limiter
	open   int
}

func newLimitedListener(ln net.Listener, cfg ConnLimit, now func() time.Time, refused *prometheus.CounterVec, log *slog.Logger) net.Listener {
	if cfg.Rate < 0 {
		return ln
	}
	return &limitedListener{Listener: ln, cfg: cfg, now: now, refused: refused, log: log, sources: map[string]*sourceConns{}}
}

// Accept returns the next connection within the limits; those over them
// are closed here and never reach the SSH server.
func (l *limitedListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		host, _, err := net.SplitHostPort(c.RemoteAddr().String())
		if err != nil {
			return c, nil
		}
		if ip := net.ParseIP(host); ip != nil && ip.IsLoopback() {
			return c, nil
		}
		if reason := l.admit(host); reason != "" {
			l.refuse(c, host, reason)
			continue
		}
		return &limitedConn{Conn: c, release: func() { l.release(host) }}, nil
	}
}

// admit takes a token and an open slot for host, or says why not.
func (l *limitedListener) admit(host string) string {
	now := l.now()
	l.mu.Lock()
	defer l.mu.Unlock()
	if now.Sub(l.lastSweep) > time.Minute {
		for h, s := range l.sources {
			if s.open == 0 && s.bucket.TokensAt(now) >= float64(l.cfg.Burst) {
				delete(l.sources, h) // a new one would be the same
			}
		}
		l.lastSweep = now
	}
	s := l.sources[host]
	if s == nil {
		s = &sourceConns{bucket: rate.NewLimiter(rate.Limit(l.cfg.Rate), l.cfg.Burst)}
		l.sources[host] = s
	}
	if s.open >= l.cfg.MaxOpen {
		return "open"
	}
	if !s.bucket.AllowN(now, 1) {
		return "rate"
	}
	s.open++
	return ""
}

func (l *limitedListener) release(host string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if s := l.sources[host]; s != nil && s.open > 0 {
		s.open--
	}
}

// refuse counts c, closes it, and logs at most one line a second. The
// count comes first: a client that saw its connection closed then finds
// it counted.
func (l *limitedListener) refuse(c net.Conn, host, reason string) {
	l.refused.WithLabelValues(reason).Inc()
	_ = c.Close()
	now := l.now()
	l.mu.Lock()
	quiet := now.Sub(l.lastLog) < time.Second
	if !quiet {
		l.lastLog = now
	}
	l.mu.Unlock()
	if !quiet {
		l.log.Warn("connection refused: over the per-address limit", "source", host, "limit", reason)
	}
}

// limitedConn gives its slot back once, when closed.
type limitedConn struct {
	net.Conn
	once    sync.Once
	release func()
}

func (c *limitedConn) Close() error {
	c.once.Do(c.release)
	return c.Conn.Close()
}
