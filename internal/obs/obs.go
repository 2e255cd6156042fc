// Package obs is what the three daemons share to be observed: a
// Prometheus registry with the process collectors, and one small HTTP
// server with /healthz (alive), /readyz (ready checks) and /metrics.
//
// The server listens on its own address (--metrics-addr), apart from any
// other listener a daemon has, so that it can stay on loopback or a
// management network while the daemon's real ports face users.
package obs

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Namespace prefixes every metric the daemons export.
const Namespace = "gpuaas"

// Paths the server answers.
const (
	HealthzPath = "/healthz"
	ReadyzPath  = "/readyz"
	MetricsPath = "/metrics"
)

// DefaultCheckTimeout bounds one readiness check.
const DefaultCheckTimeout = 2 * time.Second

// NewRegistry is a registry with the Go runtime and process collectors.
func NewRegistry() *prometheus.Registry {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return reg
}

// Check is one condition of readiness. Func returns nil when it holds.
type Check struct {
	Name string
	Func func(ctx context.Context) error
}

// Config configures a Server.
type Config struct {
	// Addr is where to listen ("127.0.0.1:9464", port 0 for any). Required.
	Addr string
	// Gatherer is what /metrics serves (default: a NewRegistry).
	Gatherer prometheus.Gatherer
	// CheckTimeout bounds each readiness check (default DefaultCheckTimeout).
	CheckTimeout time.Duration
	Log          *slog.Logger
}

// CheckAndSetDefaults validates c and fills defaults.
func (c *Config) CheckAndSetDefaults() error {
	if c.Addr == "" {
		return errors.New("obs: Addr is required")
	}
	if c.Gatherer == nil {
		c.Gatherer = NewRegistry()
	}
	if c.CheckTimeout == 0 {
		c.CheckTimeout = DefaultCheckTimeout
	}
	if c.Log == nil {
		c.Log = slog.New(slog.DiscardHandler)
	}
	return nil
}

// Server serves /healthz, /readyz and /metrics.
type Server struct {
	cfg Config
	l   net.Listener
	// mu protects checks: a daemon adds its checks as its parts come up.
	mu     sync.Mutex
	checks []Check
}

// Listen binds cfg.Addr; Serve answers on it.
func Listen(cfg Config) (*Server, error) {
	if err := cfg.CheckAndSetDefaults(); err != nil {
		return nil, err
	}
	l, err := net.Listen("tcp", cfg.Addr)
	if err != nil {
		return nil, fmt.Errorf("listen metrics %s: %w", cfg.Addr, err)
	}
	return &Server{cfg: cfg, l: l}, nil
}

// Addr is the address the server listens on.
func (s *Server) Addr() string { return s.l.Addr().String() }

// URL is the server's base URL ("http://127.0.0.1:9464").
func (s *Server) URL() string { return "http://" + s.Addr() }

// AddCheck adds readiness checks: /readyz answers 200 only while all hold.
func (s *Server) AddCheck(checks ...Check) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.checks = append(s.checks, checks...)
}

// Handler serves the three paths.
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET "+HealthzPath, func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		fmt.Fprintln(w, "ok")
	})
	mux.HandleFunc("GET "+ReadyzPath, s.readyz)
	mux.Handle("GET "+MetricsPath, promhttp.HandlerFor(s.cfg.Gatherer, promhttp.HandlerOpts{
		ErrorLog: slog.NewLogLogger(s.cfg.Log.Handler(), slog.LevelWarn), ErrorHandling: promhttp.ContinueOnError}))
	return mux
}

// Ready runs every check (at once, each within CheckTimeout) and returns
// one line per check, and whether all hold.
func (s *Server) Ready(ctx context.Context) ([]string, bool) {
	s.mu.Lock()
	checks := append([]Check(nil), s.checks...)
	s.mu.Unlock()
	lines := make([]string, len(checks))
	var wg sync.WaitGroup
	for i, c := range checks {
		wg.Go(func() {
			cctx, cancel := context.WithTimeout(ctx, s.cfg.CheckTimeout)
			defer cancel()
			if err := c.Func(cctx); err != nil {
				lines[i] = "fail " + c.Name + ": " + strings.ReplaceAll(err.Error(), "\n", " ")
				return
			}
			lines[i] = "ok " + c.Name
		})
	}
	wg.Wait()
	ok := true
	for _, l := range lines {
		ok = ok && strings.HasPrefix(l, "ok ")
	}
	return lines, ok
}

func (s *Server) readyz(w http.ResponseWriter, r *http.Request) {
	lines, ok := s.Ready(r.Context())
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	if !ok {
		w.WriteHeader(http.StatusServiceUnavailable)
	}
	for _, l := range lines {
		fmt.Fprintln(w, l)
	}
}

// Serve answers until ctx ends, then shuts down.
func (s *Server) Serve(ctx context.Context) error {
	srv := &http.Server{Handler: s.Handler(), ReadHeaderTimeout: 5 * time.Second, WriteTimeout: 30 * time.Second}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(s.l) }()
	s.cfg.Log.Info("metrics serving", "addr", s.Addr(), "paths", HealthzPath+" "+ReadyzPath+" "+MetricsPath)
	select {
	case err := <-errc:
		return fmt.Errorf("metrics server: %w", err)
	case <-ctx.Done():
	}
	shutCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	if err := srv.Shutdown(shutCtx); err != nil {
		return fmt.Errorf("metrics shutdown: %w", err)
	}
	if err := <-errc; !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("metrics server: %w", err)
	}
	return nil
}

// Close releases the listener of a server that never served.
func (s *Server) Close() error { return s.l.Close() }
