package sshgate

import (
	"context"
	"net"
	"sync"
	"time"
)

// tracker counts work in flight. Unlike sync.WaitGroup, work may start
// while someone waits (a connection finishing its handshake as the gateway
// shuts down); wait then waits for it too.
type tracker struct {
	// mu protects the following.
	mu   sync.Mutex
	n    int
	idle chan struct{} // closed when n drops to zero
}

func (t *tracker) add() {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.n == 0 {
		t.idle = make(chan struct{})
	}
	t.n++
}

func (t *tracker) done() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.n--
	if t.n == 0 {
		close(t.idle)
	}
}

// wait returns when nothing is in flight, or with ctx's error.
func (t *tracker) wait(ctx context.Context) error {
	for {
		t.mu.Lock()
		if t.n == 0 {
			t.mu.Unlock()
			return nil
		}
		idle := t.idle
		t.mu.Unlock()
		select {
		case <-idle:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// trackedConn is a client connection counted in a tracker until closed,
// with a deadline for its handshake. The library resets the deadline on
// every read and write (to its own idle and max timeouts, none here), so
// SetDeadline keeps the handshake deadline in force until authenticated.
type trackedConn struct {
	net.Conn
	once sync.Once
	t    *tracker

	// mu protects authBy.
	mu     sync.Mutex
	authBy time.Time // the handshake deadline; zero once authenticated
}

func newTrackedConn(conn net.Conn, t *tracker, authBy time.Time) *trackedConn {
	t.add()
	c := &trackedConn{Conn: conn, t: t, authBy: authBy}
	_ = c.SetDeadline(time.Time{})
	return c
}

// SetDeadline sets t, or the handshake deadline if that is earlier.
func (c *trackedConn) SetDeadline(t time.Time) error {
	c.mu.Lock()
	by := c.authBy
	c.mu.Unlock()
	if !by.IsZero() && (t.IsZero() || t.After(by)) {
		t = by
	}
	return c.Conn.SetDeadline(t)
}

// authenticated lifts the handshake deadline.
func (c *trackedConn) authenticated() {
	c.mu.Lock()
	c.authBy = time.Time{}
	c.mu.Unlock()
	_ = c.Conn.SetDeadline(time.Time{})
}

func (c *trackedConn) Close() error {
	c.once.Do(c.t.done)
	return c.Conn.Close()
}
