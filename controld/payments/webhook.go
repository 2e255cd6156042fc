package payments

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stripe/stripe-go/v76"
	"github.com/stripe/stripe-go/v76/webhook"
)

// MaxWebhookBody bounds a webhook request body. Stripe's events are a few
// kilobytes; this leaves room for large metadata.
const MaxWebhookBody = 256 << 10

// webhookTimeout bounds handling one delivery. Stripe waits about 10 s
// before it counts a delivery as failed and retries.
const webhookTimeout = 8 * time.Second

// Outcomes of a delivery, stored with the event and sent in the reply.
const (
	OutcomeCredited  = "credited"
	OutcomeDuplicate = "duplicate"
	OutcomeIgnored   = "ignored"
	OutcomeNotPaid   = "not_paid"
	OutcomeUnknown   = "unknown_session"
	OutcomeAlready   = "already_credited"
	OutcomeMismatch  = "mismatch"
)

// WebhookHandler serves Stripe's webhook deliveries (POST). It reads the
// raw body first and verifies its signature over those exact bytes; a
// refused delivery is answered 400 with nothing written. Checkout
// completions that are paid credit the project once: the event id is
// recorded in the transaction of the credit, so concurrent and repeated
// deliveries are answered 200 and change nothing. Event types it does not
// act on are acknowledged (200) and ignored. A database failure is
// answered 500 so that Stripe delivers again.
func (s *Service) WebhookHandler() http.Handler {
	return http.HandlerFunc(s.serveWebhook)
}

func (s *Service) serveWebhook(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		http.Error(w, "POST only", http.StatusMethodNotAllowed)
		return
	}
	if s.cfg.WebhookSecret == "" {
		http.Error(w, "webhook not configured", http.StatusServiceUnavailable)
		return
	}
	payload, err := io.ReadAll(http.MaxBytesReader(w, r.Body, MaxWebhookBody))
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			http.Error(w, "body too large", http.StatusRequestEntityTooLarge)
			return
		}
		http.Error(w, "cannot read body", http.StatusBadRequest)
		return
	}
	ev, err := s.VerifyEvent(payload, r.Header.Get("Stripe-Signature"))
	if err != nil {
		s.cfg.Log.Warn("stripe webhook refused", "err", err, "remote", r.RemoteAddr)
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), webhookTimeout)
	defer cancel()
	outcome, err := s.HandleEvent(ctx, ev)
	if err != nil {
		s.cfg.Log.Error("stripe webhook", "event", ev.ID, "type", ev.Type, "err", err)
		http.Error(w, "internal error; deliver again", http.StatusInternalServerError)
		return
	}
	s.cfg.Log.Info("stripe webhook", "event", ev.ID, "type", ev.Type, "outcome", outcome)
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]string{"event": ev.ID, "outcome": outcome})
}

// VerifyEvent checks that header signs payload with the webhook secret,
// within the tolerance of the injected clock, and that the event is of the
// pinned API version; then it decodes the event. stripe-go checks the
// signature and version; its own timestamp check reads the wall clock, so
// the tolerance is checked here against Config.Now instead.
func (s *Service) VerifyEvent(payload []byte, header string) (stripe.Event, error) {
	ev, err := webhook.ConstructEventWithOptions(payload, header, s.cfg.WebhookSecret,
		webhook.ConstructEventOptions{IgnoreTolerance: true})
	switch {
	case errors.Is(err, webhook.ErrNotSigned), errors.Is(err, webhook.ErrInvalidHeader), errors.Is(err, webhook.ErrNoValidSignature):
		return ev, ErrBadSignature
	case err != nil && ev.ID != "" && ev.APIVersion != APIVersion:
		return ev, errors.Join(ErrAPIVersion, errors.New("got "+ev.APIVersion))
	case err != nil:
		return ev, errors.Join(ErrMalformed, err)
	}
	signed, err := signedAt(header)
	if err != nil {
		return ev, ErrBadSignature
	}
	if age := s.cfg.Now().Sub(signed); age > s.cfg.Tolerance || age < -s.cfg.Tolerance {
		return ev, ErrStale
	}
	if ev.ID == "" || ev.Type == "" || ev.Data == nil {
		return ev, ErrMalformed
	}
	return ev, nil
}

// signedAt reads the t= timestamp of a Stripe-Signature header.
func signedAt(header string) (time.Time, error) {
	for _, part := range strings.Split(header, ",") {
		if v, ok := strings.CutPrefix(part, "t="); ok {
			sec, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				return time.Time{}, err
			}
			return time.Unix(sec, 0), nil
		}
	}
	return time.Time{}, errors.New("no timestamp")
}

// HandleEvent acts on a verified event and returns the outcome. Events it
// acts on are recorded by id in the same transaction as their effect, so
// each takes effect once however often it is delivered.
func (s *Service) HandleEvent(ctx context.Context, ev stripe.Event) (string, error) {
	var act func(ctx context.Context, tx pgx.Tx, ev stripe.Event) (string, error)
	switch ev.Type {
	case stripe.EventTypeCheckoutSessionCompleted, stripe.EventTypeCheckoutSessionAsyncPaymentSucceeded:
		act = s.creditCheckout
	default:
		return OutcomeIgnored, nil
	}
	var outcome string
	err := pgx.BeginFunc(ctx, s.cfg.Pool, func(tx pgx.Tx) error {
		// A concurrent delivery of the same event waits here for the first
		// to commit, then inserts nothing.
		tag, err := tx.Exec(ctx, `INSERT INTO stripe_events (id, type, api_version, received_at, outcome)
			VALUES ($1,$2,$3,$4,'') ON CONFLICT (id) DO NOTHING`, ev.ID, string(ev.Type), ev.APIVersion, s.now())
		if err != nil {
			return wrap("record stripe event", err)
		}
		if tag.RowsAffected() == 0 {
			outcome = OutcomeDuplicate
			return nil
		}
		if outcome, err = act(ctx, tx, ev); err != nil {
			return err
		}
		_, err = tx.Exec(ctx, `UPDATE stripe_events SET outcome = $2 WHERE id = $1`, ev.ID, outcome)
		return wrap("record stripe event outcome", err)
	})
	return outcome, err
}
