package webhooks

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/gpuaas/gpuaas/internal/api"
)

// Settings tune deliveries: where they may go and how they are retried
// (controld's Config.Webhooks).
type Settings struct {
	Policy Policy
	// RootCAs verify receivers' certificates (nil: the system's).
	RootCAs *x509.CertPool
	// MaxAttempts before a delivery is dead (default 12: with the default
	// backoff about eight hours of trying).
	MaxAttempts int
	// Backoff is the wait after the first failed attempt, doubled after
	// each further one up to MaxBackoff (defaults 10s and 1h).
	Backoff, MaxBackoff time.Duration
	// Timeout bounds one attempt (default 10s).
	Timeout time.Duration
	// Interval is how often due deliveries are looked for without a kick
	// (default 1s).
	Interval time.Duration
	// Workers send at once (default 8).
	Workers int
	// KeepDelivered and KeepDead are how long finished deliveries stay
	// listed (defaults 7 and 30 days).
	KeepDelivered, KeepDead time.Duration
}

// SenderConfig configures a Sender.
type SenderConfig struct {
	Settings
	Pool *pgxpool.Pool
	Now  func() time.Time
	Log  *slog.Logger
}

// CheckAndSetDefaults validates c and fills defaults.
func (c *SenderConfig) CheckAndSetDefaults() error {
	if c.Pool == nil || c.Now == nil || c.Log == nil {
		return errors.New("webhooks: Pool, Now and Log are required")
	}
	return c.Settings.CheckAndSetDefaults()
}

// CheckAndSetDefaults fills defaults.
func (c *Settings) CheckAndSetDefaults() error {
	for _, d := range []struct {
		v   *time.Duration
		def time.Duration
	}{{&c.Backoff, 10 * time.Second}, {&c.MaxBackoff, time.Hour}, {&c.Timeout, 10 * time.Second},
		{&c.Interval, time.Second}, {&c.KeepDelivered, 7 * 24 * time.Hour}, {&c.KeepDead, 30 * 24 * time.Hour}} {
		if *d.v <= 0 {
			*d.v = d.def
		}
	}
	if c.MaxAttempts <= 0 {
		c.MaxAttempts = 12
	}
	if c.Workers <= 0 {
		c.Workers = 8
	}
	return nil
}

// Sender posts due deliveries. Several replicas may run one: a delivery is
// claimed (its next attempt moved past the attempt's timeout) before it is
// sent, so a replica that stops mid-attempt leaves it to be sent again
// after that — deliveries are at least once, and receivers drop repeats
// by the delivery id.
type Sender struct {
	cfg    SenderConfig
	client *http.Client
	kick   chan struct{}
}

// NewSender returns a Sender; Run sends.
func NewSender(cfg SenderConfig) (*Sender, error) {
	if err := cfg.CheckAndSetDefaults(); err != nil {
		return nil, err
	}
	tr := &http.Transport{
		DialContext:         cfg.Policy.dialContext(),
		TLSClientConfig:     &tls.Config{RootCAs: cfg.RootCAs, MinVersion: tls.VersionTLS12},
		ForceAttemptHTTP2:   true,
		MaxIdleConnsPerHost: 2,
		IdleConnTimeout:     90 * time.Second,
	}
	return &Sender{cfg: cfg, kick: make(chan struct{}, 1),
		client: &http.Client{Transport: tr, Timeout: cfg.Timeout,
			// A redirect is an answer that is not 2xx: following it could
			// lead a delivery to where the policy would not let it go.
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}}, nil
}

// Kick makes Run look for due deliveries now.
func (s *Sender) Kick() {
	select {
	case s.kick <- struct{}{}:
	default:
	}
}

// Run sends due deliveries until ctx ends.
func (s *Sender) Run(ctx context.Context) error {
	t := time.NewTicker(s.cfg.Interval)
	defer t.Stop()
	lastPrune := time.Time{}
	for {
		for {
			n, err := s.RunOnce(ctx)
			if err != nil && ctx.Err() == nil {
				s.cfg.Log.Warn("webhooks: send deliveries", "err", err)
			}
			if n == 0 || err != nil {
				break
			}
		}
		if now := s.cfg.Now(); now.Sub(lastPrune) > time.Hour {
			if err := s.prune(ctx, now); err != nil && ctx.Err() == nil {
				s.cfg.Log.Warn("webhooks: prune deliveries", "err", err)
			} else {
				lastPrune = now
			}
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		case <-s.kick:
		}
	}
}

// claimed is a delivery taken for one attempt.
type claimed struct {
	id, webhookID, kind, url, secret string
	body                             []byte
	attempt                          int
}

// RunOnce claims the deliveries due now (at most Workers), sends them and
// records each outcome; it returns how many it sent.
func (s *Sender) RunOnce(ctx context.Context) (int, error) {
	now := s.cfg.Now()
	rows, err := s.cfg.Pool.Query(ctx, `UPDATE webhook_deliveries d SET attempts = d.attempts + 1, next_attempt_at = $2
		FROM webhooks w
		WHERE w.id = d.webhook_id AND d.id IN (SELECT id FROM webhook_deliveries
			WHERE state = 'pending' AND next_attempt_at <= $1 ORDER BY next_attempt_at, id LIMIT $3 FOR UPDATE SKIP LOCKED)
		RETURNING d.id, d.webhook_id, d.event_kind, w.url, w.secret, d.body, d.attempts`,
		now.UTC(), now.Add(2*s.cfg.Timeout).UTC(), s.cfg.Workers)
	if err != nil {
		return 0, fmt.Errorf("claim deliveries: %w", err)
	}
	batch, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (claimed, error) {
		var c claimed
		err := r.Scan(&c.id, &c.webhookID, &c.kind, &c.url, &c.secret, &c.body, &c.attempt)
		return c, err
	})
	if err != nil {
		return 0, fmt.Errorf("claim deliveries: %w", err)
	}
	var wg sync.WaitGroup
	errs := make([]error, len(batch))
	for i, c := range batch {
		wg.Add(1)
		go func() {
			defer wg.Done()
			status, sendErr := s.send(ctx, c)
			errs[i] = s.record(ctx, c, status, sendErr)
		}()
	}
	wg.Wait()
	return len(batch), errors.Join(errs...)
}

// send makes one attempt: the body, signed, posted to the URL.
func (s *Sender) send(ctx context.Context, c claimed) (int, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.url, bytes.NewReader(c.body))
	if err != nil {
		return 0, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "gpuaas-webhooks/1")
	req.Header.Set(SignatureHeader, Sign(c.secret, s.cfg.Now(), c.body))
	req.Header.Set(DeliveryHeader, c.id)
	req.Header.Set(EventHeader, c.kind)
	resp, err := s.client.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		// The code only: the reason phrase is the receiver's text.
		return resp.StatusCode, fmt.Errorf("receiver answered %d %s", resp.StatusCode, http.StatusText(resp.StatusCode))
	}
	return resp.StatusCode, nil
}

// record stores an attempt's outcome: delivered, or the next attempt
// after the backoff, or dead after the last one.
func (s *Sender) record(ctx context.Context, c claimed, status int, sendErr error) error {
	now := s.cfg.Now().UTC()
	if sendErr == nil {
		_, err := s.cfg.Pool.Exec(ctx, `UPDATE webhook_deliveries SET state = 'delivered', delivered_at = $2,
			last_status = $3, last_error = '' WHERE id = $1 AND state = 'pending'`, c.id, now, status)
		return err
	}
	msg := attemptError(sendErr)
	if c.attempt >= s.cfg.MaxAttempts {
		s.cfg.Log.Warn("webhooks: delivery dead", "delivery", c.id, "webhook", c.webhookID, "attempts", c.attempt, "err", msg)
		_, err := s.cfg.Pool.Exec(ctx, `UPDATE webhook_deliveries SET state = 'dead', last_status = $2, last_error = $3
			WHERE id = $1 AND state = 'pending'`, c.id, status, msg)
		return err
	}
	_, err := s.cfg.Pool.Exec(ctx, `UPDATE webhook_deliveries SET next_attempt_at = $2, last_status = $3, last_error = $4
		WHERE id = $1 AND state = 'pending'`, c.id, now.Add(s.backoff(c.attempt)), status, msg)
	return err
}

// attemptError is a failed attempt's error as deliveries list it: at most
// 500 bytes, fit for a terminal — a network error can quote what the
// receiver sent (a certificate's names), which project members then read.
func attemptError(err error) string {
	msg := err.Error()
	if len(msg) > 500 {
		msg = msg[:500]
	}
	return api.SanitizeText(msg)
}

// backoff is the wait after the attempt-th failed attempt.
func (s *Sender) backoff(attempt int) time.Duration {
	d := s.cfg.Backoff
	for i := 1; i < attempt && d < s.cfg.MaxBackoff; i++ {
		d *= 2
	}
	return min(d, s.cfg.MaxBackoff)
}

// prune deletes finished deliveries past their retention, and those of
// webhooks removed.
func (s *Sender) prune(ctx context.Context, now time.Time) error {
	_, err := s.cfg.Pool.Exec(ctx, `DELETE FROM webhook_deliveries
		WHERE (state = 'delivered' AND delivered_at < $1) OR (state = 'dead' AND created_at < $2)`,
		now.Add(-s.cfg.KeepDelivered).UTC(), now.Add(-s.cfg.KeepDead).UTC())
	return err
}
