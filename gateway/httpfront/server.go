package httpfront

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httputil"
	"strings"
	"time"

	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/gateproto"
)

// Server is the HTTPS front.
type Server struct {
	cfg      Config
	proxy    *httputil.ReverseProxy
	verdicts *verdictCache
	limits   *limiters
	metrics  *Metrics
	srv      *http.Server
}

// New makes a front from cfg.
func New(cfg Config) (*Server, error) {
	if err := cfg.CheckAndSetDefaults(); err != nil {
		return nil, err
	}
	s := &Server{cfg: cfg, verdicts: newVerdictCache(cfg.Now), metrics: newMetrics(),
		limits: newLimiters(cfg.RatePerExposure, cfg.RatePerSource, cfg.Burst, cfg.Now)}
	s.proxy = &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			rq := requestOf(pr.In.Context())
			pr.Out.URL.Scheme, pr.Out.URL.Host = "http", rq.label
			pr.Out.Host = pr.In.Host
			pr.SetXForwarded()
			// The caller's credential is the platform's, never the
			// renter's server's.
			pr.Out.Header.Del("Authorization")
			dropFrontCookie(pr.Out)
		},
		Transport:     s.transport(),
		FlushInterval: -1, // server-sent events and long polls pass as written
		BufferPool:    newBufferPool(),
		ErrorHandler:  s.proxyError,
		// Upgraded connections are copied without the handler (upgrade_hijack.go).
		ModifyResponse: takeUpgrade,
		ErrorLog:       nil,
	}
	tlsCfg := cfg.TLS.Clone()
	if len(tlsCfg.NextProtos) == 0 {
		tlsCfg.NextProtos = []string{"h2", "http/1.1"}
	}
	s.srv = &http.Server{Handler: s, TLSConfig: tlsCfg, ReadHeaderTimeout: 10 * time.Second,
		ConnContext: corkContext} // cork.go
	return s, nil
}

// Metrics are the front's per-exposure counters.
func (s *Server) Metrics() *Metrics { return s.metrics }

// Serve serves HTTPS on ln until Shutdown.
func (s *Server) Serve(ln net.Listener) error {
	err := s.srv.ServeTLS(corkListener{ln}, "", "")
	if errors.Is(err, http.ErrServerClosed) {
		return nil
	}
	return err
}

// Shutdown stops accepting and waits for requests in flight (WebSockets
// and streams are closed).
func (s *Server) Shutdown(ctx context.Context) error { return s.srv.Shutdown(ctx) }

// request is what the front learned of a request before proxying it.
type request struct {
	label, alloc string
	port         uint16
	cred         credential
	// w and up are the request's writer and registrations, for an upgrade
	// taken over (upgrade_hijack.go).
	w  http.ResponseWriter
	up *upgradeScope
}

type requestKey struct{}

func requestOf(ctx context.Context) *request {
	rq, _ := ctx.Value(requestKey{}).(*request)
	return rq
}

// label is the exposure label of host ("<port>-<allocation>") when host
// is a name directly under the apps domain.
func (s *Server) label(host string) (string, bool) {
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	host = strings.ToLower(strings.TrimSuffix(host, "."))
	label, ok := strings.CutSuffix(host, "."+s.cfg.Domain)
	if !ok || label == "" || strings.Contains(label, ".") {
		return "", false
	}
	return label, true
}

// ServeHTTP routes a request by its host name to its exposure, decides it
// and proxies it.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	label, ok := s.label(r.Host)
	if !ok {
		page(w, http.StatusNotFound, "Not an exposure", fmt.Sprintf("%s is not a name this gateway serves.", r.Host))
		return
	}
	alloc, port, ok := api.ParseExposureHost(label)
	if !ok {
		page(w, http.StatusNotFound, "Not an exposure", "Exposure names are <port>-<allocation>.")
		return
	}
	if r.URL.Path == api.LinkPath {
		s.redeemLink(w, r, label)
		return
	}
	if !s.limits.allow(label, sourceOf(r)) {
		s.metrics.of(label).limited.Add(1)
		w.Header().Set("Retry-After", "1")
		page(w, http.StatusTooManyRequests, "Too many requests", "Slow down and try again in a moment.")
		return
	}
	rq := &request{label: label, alloc: alloc, port: uint16(port), cred: s.credentialOf(r, label)}
	v, err := s.verdict(r.Context(), rq)
	if err != nil {
		s.cfg.Log.Warn("https verdict", "host", label, "err", err)
		page(w, http.StatusBadGateway, "The platform did not answer", "Try again in a moment.")
		return
	}
	if v.Verdict != gateproto.VerdictAllow {
		verdictPage(w, v.Verdict, v.Reason, label)
		return
	}
	s.serveAllowed(w, r, rq, v)
}

// serveAllowed proxies an allowed request: tracked as the allocation's
// activity, ended with its login, counted in the exposure's metrics.
func (s *Server) serveAllowed(w http.ResponseWriter, r *http.Request, rq *request, v *gateproto.GateAuthorizeHTTPResponse) {
	ctx, cancel := context.WithCancel(r.Context())
	// Released when the handler returns, or when an upgraded connection
	// taken over ends (upgrade_hijack.go).
	up := newUpgradeScope(cancel)
	defer up.release()
	if v.SessionID != "" {
		up.onDone(s.cfg.Core.AddLogin(&requestLogin{ref: gateproto.GateSession{SessionID: v.SessionID, UserID: v.UserID},
			end: func(string) { s.verdicts.dropSession(v.SessionID); up.end() }}))
	}
	up.onDone(s.cfg.Core.Track(rq.alloc, nil).Close)
	m := s.metrics.of(rq.label)
	m.requests.Add(1)
	cw := &countingWriter{ResponseWriter: w, n: &m.bytesOut, in: &m.bytesIn}
	if r.Body != nil && r.Body != http.NoBody {
		r.Body = &countingBody{ReadCloser: r.Body, n: &m.bytesIn}
	}
	rq.w, rq.up = corkWriter(cw, r), up
	s.proxy.ServeHTTP(rq.w, r.WithContext(context.WithValue(ctx, requestKey{}, rq)))
}

// requestLogin is a request in flight as the core's revocation sees it.
type requestLogin struct {
	ref gateproto.GateSession
	end func(reason string)
}

func (l *requestLogin) Ref() gateproto.GateSession { return l.ref }
func (l *requestLogin) End(reason string)          { l.end(reason) }

// sourceOf is the client address a request came from.
func sourceOf(r *http.Request) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return r.RemoteAddr
	}
	return host
}
