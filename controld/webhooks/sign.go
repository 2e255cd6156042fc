package webhooks

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Headers of a delivery (docs/webhooks.md).
const (
	// SignatureHeader carries "t=<unix seconds>,v1=<hex HMAC-SHA256 of
	// "<t>.<body>" keyed with the webhook's secret>" — Stripe's scheme.
	SignatureHeader = "Gpuaas-Signature"
	// DeliveryHeader is the delivery id, the same on every attempt.
	DeliveryHeader = "Gpuaas-Delivery"
	// EventHeader is the event kind.
	EventHeader = "Gpuaas-Event"
)

// secretPrefix marks webhook secrets, so they are recognised where they
// leak (logs, repositories).
const secretPrefix = "whsec_"

// newSecret returns a fresh signing secret: 32 random bytes.
func newSecret() string {
	var b [32]byte
	_, _ = rand.Read(b[:]) // crypto/rand never fails on supported platforms
	return secretPrefix + base64.RawURLEncoding.EncodeToString(b[:])
}

// Sign is the SignatureHeader value of body sent at t.
func Sign(secret string, t time.Time, body []byte) string {
	return fmt.Sprintf("t=%d,v1=%s", t.Unix(), mac(secret, t.Unix(), body))
}

func mac(secret string, t int64, body []byte) string {
	m := hmac.New(sha256.New, []byte(secret))
	m.Write([]byte(strconv.FormatInt(t, 10)))
	m.Write([]byte{'.'})
	m.Write(body)
	return hex.EncodeToString(m.Sum(nil))
}

// Errors of Verify.
var (
	ErrNoSignature  = errors.New("no valid signature")
	ErrStaleRequest = errors.New("signature timestamp outside the tolerance")
)

// Verify checks a delivery the way a receiver should: a v1 signature of
// the body with the secret, made within tolerance of now (a replayed old
// delivery is refused). It is what docs/webhooks.md's snippet does.
func Verify(secret, header string, body []byte, now time.Time, tolerance time.Duration) error {
	var t int64 = -1
	var sigs []string
	for _, part := range strings.Split(header, ",") {
		k, v, ok := strings.Cut(strings.TrimSpace(part), "=")
		if !ok {
			continue
		}
		switch k {
		case "t":
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				return fmt.Errorf("verify: %w: bad timestamp", ErrNoSignature)
			}
			t = n
		case "v1":
			sigs = append(sigs, v)
		}
	}
	if t < 0 || len(sigs) == 0 {
		return fmt.Errorf("verify: %w", ErrNoSignature)
	}
	if d := now.Sub(time.Unix(t, 0)); d > tolerance || d < -tolerance {
		return fmt.Errorf("verify: %w", ErrStaleRequest)
	}
	want := mac(secret, t, body)
	for _, s := range sigs {
		if hmac.Equal([]byte(s), []byte(want)) {
			return nil
		}
	}
	return fmt.Errorf("verify: %w", ErrNoSignature)
}
