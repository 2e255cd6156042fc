package controld

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"
)

// HTTP paths controld serves when Config.HTTPAddr is set.
const (
	// StripeWebhookPath receives Stripe's webhook deliveries.
	StripeWebhookPath = "/stripe/webhook"
	// TopupDonePath and TopupCancelledPath are plain pages Checkout can
	// send the browser back to (see `gpuaas dev --stripe-api`).
	TopupDonePath      = "/billing/topup/done"
	TopupCancelledPath = "/billing/topup/cancelled"
)

// listenHTTP binds Config.HTTPAddr, so that HTTPAddr() is known once Ready
// is closed.
func (s *Server) listenHTTP() error {
	if s.cfg.HTTPAddr == "" {
		return nil
	}
	l, err := net.Listen("tcp", s.cfg.HTTPAddr)
	if err != nil {
		return fmt.Errorf("listen http %s: %w", s.cfg.HTTPAddr, err)
	}
	s.httpListener = l
	return nil
}

// HTTPAddr is the address the HTTP server (Stripe webhooks) listens on, or
// "" when it is disabled.
func (s *Server) HTTPAddr() string {
	if s.httpListener == nil {
		return ""
	}
	return s.httpListener.Addr().String()
}

func (s *Server) httpMux() *http.ServeMux {
	mux := http.NewServeMux()
	mux.Handle(StripeWebhookPath, s.payments.WebhookHandler())
	page := func(text string) http.HandlerFunc {
		return func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Type", "text/plain; charset=utf-8")
			fmt.Fprintln(w, text)
		}
	}
	mux.Handle("GET "+TopupDonePath, page("Payment received. Your gpuaas balance is credited as soon as Stripe confirms it; `gpuaas billing balance` shows it. You can close this tab."))
	mux.Handle("GET "+TopupCancelledPath, page("Top-up cancelled; nothing was charged. You can close this tab."))
	return mux
}

// serveHTTP serves until ctx ends, then shuts down, letting deliveries in
// flight finish.
func (s *Server) serveHTTP(ctx context.Context) error {
	if s.httpListener == nil {
		return nil
	}
	srv := &http.Server{Handler: s.httpMux(), ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout: 30 * time.Second, WriteTimeout: 30 * time.Second, IdleTimeout: 2 * time.Minute}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(s.httpListener) }()
	s.cfg.Log.Info("controld http serving", "addr", s.HTTPAddr(), "stripe_webhook", StripeWebhookPath)
	if s.cfg.Stripe.WebhookSecret == "" {
		s.cfg.Log.Warn("no Stripe webhook secret: webhook deliveries are answered 503 and nothing is credited")
	}
	select {
	case err := <-errc:
		return fmt.Errorf("http server: %w", err)
	case <-ctx.Done():
	}
	shutCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	if err := srv.Shutdown(shutCtx); err != nil {
		return fmt.Errorf("http shutdown: %w", err)
	}
	if err := <-errc; !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("http server: %w", err)
	}
	return nil
}
