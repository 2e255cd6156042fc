package webhooks

import (
	"errors"
	"strings"
	"testing"
	"time"
)

func TestSignVerify(t *testing.T) {
	secret := newSecret()
	if !strings.HasPrefix(secret, secretPrefix) || secret == newSecret() {
		t.Fatalf("secret %q: want a fresh, prefixed secret each time", secret)
	}
	at := time.Unix(1_800_000_000, 0)
	body := []byte(`{"id":"whd-1","kind":"alloc.state"}`)
	h := Sign(secret, at, body)
	if err := Verify(secret, h, body, at.Add(time.Minute), 5*time.Minute); err != nil {
		t.Fatalf("verify own signature: %v", err)
	}
	for name, tt := range map[string]struct {
		secret, header string
		body           []byte
		now            time.Time
		want           error
	}{
		"tampered body": {secret, h, []byte(`{"id":"whd-1","kind":"alloc.stat"}`), at, ErrNoSignature},
		"other secret":  {newSecret(), h, body, at, ErrNoSignature},
		"replayed late": {secret, h, body, at.Add(10 * time.Minute), ErrStaleRequest},
		"from future":   {secret, h, body, at.Add(-10 * time.Minute), ErrStaleRequest},
		"no header":     {secret, "", body, at, ErrNoSignature},
		"no v1":         {secret, "t=1800000000", body, at, ErrNoSignature},
		"bad time":      {secret, "t=soon,v1=00", body, at, ErrNoSignature},
	} {
		if err := Verify(tt.secret, tt.header, tt.body, tt.now, 5*time.Minute); !errors.Is(err, tt.want) {
			t.Errorf("%s: %v; want %v", name, err, tt.want)
		}
	}
	// A receiver rolling secrets accepts any of several v1 signatures.
	two := "t=1800000000,v1=" + strings.Repeat("0", 64) + "," + strings.TrimPrefix(h, "t=1800000000,")
	if err := Verify(secret, two, body, at, time.Minute); err != nil {
		t.Errorf("two signatures: %v", err)
	}
}

func TestBackoffDoublesUpToTheCap(t *testing.T) {
	s := &Sender{cfg: SenderConfig{Settings: Settings{Backoff: time.Second, MaxBackoff: 5 * time.Second}}}
	for attempt, want := range map[int]time.Duration{1: time.Second, 2: 2 * time.Second, 3: 4 * time.Second, 4: 5 * time.Second, 30: 5 * time.Second} {
		if got := s.backoff(attempt); got != want {
			t.Errorf("backoff(%d) = %v; want %v", attempt, got, want)
		}
	}
}

func TestAttemptErrorIsFitForATerminal(t *testing.T) {
	got := attemptError(errors.New("tls: certificate is valid for \x1b]0;pwned\x07evil.test, not hooks.example.com"))
	if strings.ContainsAny(got, "\x1b\x07") || !strings.Contains(got, `\x1b`) {
		t.Errorf("attemptError kept control characters: %q", got)
	}
	if got := attemptError(errors.New(strings.Repeat("e", 900))); len(got) != 500 {
		t.Errorf("long error: %d bytes; want 500", len(got))
	}
}
