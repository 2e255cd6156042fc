package httpfront

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"time"

	"github.com/gpuaas/gpuaas/gateway/core"
)

// transport dials each connection to an exposure as a stream the core
// opens to the allocation's port, with the grant of the request that
// needed it. Idle streams are kept per exposure (the URL's host is its
// label) and reused by later requests, which are decided on their own:
// a stream authorizes nothing by itself.
func (s *Server) transport() *http.Transport {
	return &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			rq := requestOf(ctx)
			if rq == nil {
				return nil, errors.New("dial an exposure outside a request")
			}
			g := core.Grant{AllocationID: rq.alloc, UserID: rq.cred.userID,
				HTTP: &core.HTTPGrant{Host: rq.label, Bearer: rq.cred.bearer, SessionID: rq.cred.sessionID, UserID: rq.cred.userID}}
			rw, err := s.cfg.Core.OpenPort(ctx, g, rq.port)
			if err != nil {
				return nil, err
			}
			return &streamConn{ReadWriteCloser: rw, label: rq.label}, nil
		},
		MaxIdleConnsPerHost:   16,
		IdleConnTimeout:       30 * time.Second,
		ResponseHeaderTimeout: 0, // a model server may think for long
		ForceAttemptHTTP2:     false,
	}
}

// proxyError answers a request the proxy could not pass.
func (s *Server) proxyError(w http.ResponseWriter, r *http.Request, err error) {
	var denied *core.HTTPDenied
	switch {
	case errors.Is(err, errUpgraded): // answered by the upgrade's 101
	case errors.As(err, &denied):
		verdictPage(w, denied.Verdict, denied.Reason, requestOf(r.Context()).label)
	case errors.Is(err, core.ErrTooManyStreams):
		page(w, http.StatusServiceUnavailable, "Too many connections",
			fmt.Sprintf("%s has as many open connections through the gateway as it may; close some (tabs, sockets) and try again.", requestOf(r.Context()).alloc))
	case errors.Is(err, context.Canceled):
		// The client went away, or its login ended mid-request.
		w.WriteHeader(http.StatusServiceUnavailable)
	default:
		rq := requestOf(r.Context())
		s.cfg.Log.Info("https proxy", "host", rq.label, "err", err)
		page(w, http.StatusBadGateway, "Nothing answers on this port",
			fmt.Sprintf("Port %d of %s did not answer: is the server listening on localhost:%d in the allocation?", rq.port, rq.alloc, rq.port))
	}
}

// streamConn is a core stream as a net.Conn for http.Transport. Deadlines
// are not supported by the stream: the transport's timeouts are set on
// the request instead.
type streamConn struct {
	io.ReadWriteCloser
	label string
}

type streamAddr string

func (a streamAddr) Network() string { return "gpuaas" }
func (a streamAddr) String() string  { return string(a) }

func (c *streamConn) LocalAddr() net.Addr              { return streamAddr("gateway") }
func (c *streamConn) RemoteAddr() net.Addr             { return streamAddr(c.label) }
func (c *streamConn) SetDeadline(time.Time) error      { return nil }
func (c *streamConn) SetReadDeadline(time.Time) error  { return nil }
func (c *streamConn) SetWriteDeadline(time.Time) error { return nil }
