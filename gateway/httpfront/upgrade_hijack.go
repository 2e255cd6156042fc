package httpfront

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
)

// Upgraded connections are taken over from httputil.ReverseProxy. Its
// own upgrade path keeps the request's handler running for the
// connection's whole life: net/http's connection goroutine with its
// buffered reader and writer, a goroutine watching the request's context
// and the handler's registrations. The front's ModifyResponse
// (takeUpgrade) instead hijacks the client's connection, writes the 101
// and copies both ways on two goroutines of its own, then lets the
// handler return. What the handler registered for the request (the
// login's revocation, the allocation's activity) is handed to the copy
// (upgradeScope) and ends with it: a logout still closes the socket.

// errUpgraded tells proxyError that takeUpgrade answered the request.
var errUpgraded = errors.New("httpfront: upgraded connection taken over")

// upgradeScope is what a request registered that must last as long as
// it: until the handler returns, or, for an upgraded connection, until
// its copy ends.
type upgradeScope struct {
	cancel context.CancelFunc // the request's context

	mu     sync.Mutex
	done   []func()    // run at the end, last first
	taken  bool        // the copy runs done
	ended  bool        // the login ended
	conns  []io.Closer // the copy's connections, closed when the login ends
	closed sync.Once
}

func newUpgradeScope(cancel context.CancelFunc) *upgradeScope {
	return &upgradeScope{cancel: cancel}
}

// onDone adds f to what runs at the end.
func (u *upgradeScope) onDone(f func()) {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.done = append(u.done, f)
}

// end is the login's end: the request's context is cancelled and an
// upgraded connection's copy closed.
func (u *upgradeScope) end() {
	u.cancel()
	u.mu.Lock()
	u.ended = true
	taken := u.taken
	u.mu.Unlock()
	if taken {
		u.closeConns()
	}
}

// take hands the scope to the copy of conns; false when the login ended
// already (the caller closes conns).
func (u *upgradeScope) take(conns ...io.Closer) bool {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.ended {
		return false
	}
	u.taken, u.conns = true, conns
	return true
}

func (u *upgradeScope) closeConns() {
	u.closed.Do(func() {
		for _, c := range u.conns {
			_ = c.Close()
		}
	})
}

// release is the handler's return: the end, unless a copy took the scope.
func (u *upgradeScope) release() {
	u.mu.Lock()
	taken := u.taken
	u.mu.Unlock()
	if !taken {
		u.finish()
	}
}

// finish runs what was registered, last first, and cancels the context.
func (u *upgradeScope) finish() {
	u.mu.Lock()
	done := u.done
	u.done = nil
	u.mu.Unlock()
	for i := len(done) - 1; i >= 0; i-- {
		done[i]()
	}
	u.cancel()
}

// takeUpgrade is the proxy's ModifyResponse. A 101 whose protocol is the
// one asked for, on an HTTP/1.x request, is taken over: the client's
// connection hijacked, the 101 written, the copy started, and errUpgraded
// returned so that the handler returns at once. Anything else is left to
// the proxy (which refuses a mismatched protocol itself).
func takeUpgrade(res *http.Response) error {
	if res.StatusCode != http.StatusSwitchingProtocols {
		return nil
	}
	rq := requestOf(res.Request.Context())
	back, ok := res.Body.(io.ReadWriteCloser)
	if rq == nil || rq.w == nil || rq.up == nil || !ok || res.Request.ProtoMajor != 1 ||
		!strings.EqualFold(upgradeOf(res.Header), upgradeOf(res.Request.Header)) || upgradeOf(res.Header) == "" {
		return nil
	}
	conn, brw, err := http.NewResponseController(rq.w).Hijack()
	if err != nil {
		return nil // the proxy's own path reports it
	}
	res.Body = http.NoBody // the proxy closes it after an error: back is the copy's now
	// The copy keeps up only: rq.w leads to net/http's connection and its
	// buffered reader and writer, which are free once the handler returns.
	w, up := rq.w, rq.up
	rq.w = nil
	if !up.take(conn, back) {
		_ = conn.Close()
		_ = back.Close()
		return errUpgraded
	}
	// As httputil writes it: the writer's headers and the backend's.
	h := w.Header()
	for k, vv := range res.Header {
		for _, v := range vv {
			h.Add(k, v)
		}
	}
	res.Header = h
	err = res.Write(brw)
	if err == nil {
		err = brw.Flush()
	}
	// What the client sent past the request before the 101 goes first.
	if n := brw.Reader.Buffered(); err == nil && n > 0 {
		early, _ := brw.Reader.Peek(n)
		var m int
		m, err = back.Write(early)
		if cc, ok := conn.(*countingConn); ok {
			cc.in.Add(int64(m))
		}
	}
	if err != nil {
		up.closeConns()
		up.finish()
		return errUpgraded
	}
	var left atomic.Int32
	left.Store(2)
	copyHalf := func(dst io.Writer, src io.Reader) {
		_, _ = io.Copy(dst, src) // countingConn's WriteTo/ReadFrom (upgrade.go)
		up.closeConns()          // either way ending ends both, as in httputil
		if left.Add(-1) == 0 {
			up.finish()
		}
	}
	go copyHalf(back, conn)
	go copyHalf(conn, back)
	return errUpgraded
}

// upgradeOf is the protocol a header's Upgrade names, when its
// Connection asks for one.
func upgradeOf(h http.Header) string {
	for _, v := range h.Values("Connection") {
		for _, t := range strings.Split(v, ",") {
			if strings.EqualFold(strings.TrimSpace(t), "upgrade") {
				return h.Get("Upgrade")
			}
		}
	}
	return ""
}
