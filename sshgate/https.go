package sshgate

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"sync"
	"time"

	"golang.org/x/time/rate"

	"github.com/gpuaas/gpuaas/gateway/httpfront"
	"github.com/gpuaas/gpuaas/internal/gateproto"
)

// HTTPS configures the gateway's HTTPS front (gateway/httpfront,
// docs/expose.md): exposures of allocations' ports at
// https://<port>-<allocation>.<Domain>. An empty Listen turns it off.
type HTTPS struct {
	// Listen is the TCP address to serve HTTPS on, e.g. ":443".
	Listen string
	// Listener, when set, is served instead of listening on Listen (a
	// caller that publishes the address first holds the port this way).
	Listener net.Listener
	// Domain is the apps domain ("localhost" in `gpuaas dev`).
	Domain string
	// CertFile and KeyFile are a PEM certificate for *.Domain and its key;
	// TLS, when set, is used instead (tests, gpuaas dev).
	CertFile, KeyFile string
	TLS               *tls.Config
	// CookieKey signs the front's login cookies; random per start when
	// empty.
	CookieKey []byte
	// CookieKeyFile, when set, holds CookieKey (0600; replicas given the
	// same file accept each other's cookies).
	CookieKeyFile string
	// ACME, when its CA is set, obtains a certificate per exposure name
	// instead of CertFile and KeyFile (gateway/httpfront's ACMEConfig:
	// CA, Email, CARootFile and Dir are the operator's).
	ACME httpfront.ACMEConfig
	// RatePerExposure, RatePerSource (requests a second) and Burst bound
	// requests (defaults: gateway/httpfront's).
	RatePerExposure, RatePerSource float64
	Burst                          int
}

// checkAndSetDefaults loads the certificate when the front is on.
func (h *HTTPS) checkAndSetDefaults() error {
	if h.Listen == "" && h.Listener != nil {
		h.Listen = h.Listener.Addr().String()
	}
	if h.Listen == "" {
		return nil
	}
	if h.Domain == "" {
		return fmt.Errorf("sshgate config: %w: HTTPS.Domain is required with HTTPS.Listen", ErrConfig)
	}
	if err := h.checkACMEAndCookieKey(); err != nil {
		return err
	}
	if h.TLS == nil && h.ACME.CA == "" {
		if h.CertFile == "" || h.KeyFile == "" {
			return fmt.Errorf("sshgate config: %w: HTTPS needs CertFile and KeyFile (a certificate for *.%s)", ErrConfig, h.Domain)
		}
		cert, err := tls.LoadX509KeyPair(h.CertFile, h.KeyFile)
		if err != nil {
			return fmt.Errorf("sshgate config: https certificate: %w", err)
		}
		h.TLS = &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
	}
	return nil
}

// httpsFront is the running front, when configured.
type httpsFront struct {
	mu    sync.Mutex // protects the following
	addr  net.Addr
	front *httpfront.Server
}

// HTTPSAddr is where the HTTPS front listens (nil before it does, or
// when it is off).
func (g *Gateway) HTTPSAddr() net.Addr {
	g.https.mu.Lock()
	defer g.https.mu.Unlock()
	return g.https.addr
}

// serveHTTPS starts the HTTPS front when configured; stop shuts it down.
func (g *Gateway) serveHTTPS(ctx context.Context) (stop func(), err error) {
	h := g.cfg.HTTPS
	if h.Listen == "" {
		return func() {}, nil
	}
	ln := h.Listener
	if ln == nil {
		if ln, err = net.Listen("tcp", h.Listen); err != nil {
			return nil, fmt.Errorf("listen https %s: %w", h.Listen, err)
		}
	}
	tlsCfg, stopACME, err := g.httpsTLS(ln)
	if err != nil {
		ln.Close()
		return nil, err
	}
	front, err := httpfront.New(httpfront.Config{Core: g.core, Verdicts: gateproto.Front{Client: g.cfg.Client}, Links: gateproto.Front{Client: g.cfg.Client}, Domain: h.Domain, TLS: tlsCfg,
		CookieKey: h.CookieKey, RatePerExposure: rate.Limit(h.RatePerExposure), RatePerSource: rate.Limit(h.RatePerSource),
		Burst: h.Burst, Now: g.cfg.Now, Log: g.log.With("front", "https")})
	if err != nil {
		stopACME()
		ln.Close()
		return nil, err
	}
	if err := g.metrics.reg.Register(front.Metrics()); err != nil {
		stopACME()
		ln.Close()
		return nil, fmt.Errorf("https metrics: %w", err)
	}
	g.https.mu.Lock()
	g.https.addr, g.https.front = ln.Addr(), front
	g.https.mu.Unlock()
	g.log.Info("serving https", "addr", ln.Addr().String(), "domain", h.Domain)
	served := make(chan error, 1)
	go func() { served <- front.Serve(ln) }()
	return func() {
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		if err := front.Shutdown(sctx); err != nil {
			g.log.Warn("https shutdown", "err", err)
		}
		if err := <-served; err != nil {
			g.log.Warn("serve https", "err", err)
		}
		// Upgraded connections outlive Shutdown; their pooled links end
		// them here rather than at the links' idle close.
		g.core.CloseLinks()
		stopACME()
	}, nil
}

// httpsMetrics are the HTTPS front's counters of an exposure (tests).
func (g *Gateway) httpsMetrics(label string) *httpfront.Counters {
	g.https.mu.Lock()
	defer g.https.mu.Unlock()
	return g.https.front.Metrics().Of(label)
}
