package httpfront

import (
	"crypto/rand"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"golang.org/x/time/rate"
)

// ErrConfig is a Config that cannot make a front.
var ErrConfig = errors.New("invalid https front config")

// Defaults of Config.
const (
	DefaultRatePerExposure = rate.Limit(200) // requests a second
	DefaultRatePerSource   = rate.Limit(50)
	DefaultBurst           = 100
	// DefaultCookieTTL bounds a front cookie's life (its login may end
	// sooner: the verdict is re-asked every few seconds).
	DefaultCookieTTL = 12 * time.Hour
)

// Config is the front's. Core, Verdicts, Links, Domain and TLS are required.
type Config struct {
	Core     Core
	Verdicts Verdicts
	// Links redeems one-time links (required).
	Links Links
	// Domain is the apps domain: exposures are served at
	// <port>-<allocation>.<Domain> ("localhost" in `gpuaas dev`).
	Domain string
	// TLS serves the names under Domain (a certificate for *.Domain).
	TLS *tls.Config
	// CookieKey signs front cookies (HMAC-SHA256): replicas that share it
	// accept each other's cookies (LoadCookieKey reads it from a file). A
	// random key when empty, so cookies do not survive a restart nor pass
	// from one replica to another.
	CookieKey []byte
	CookieTTL time.Duration
	// RatePerExposure and RatePerSource bound requests a second to one
	// exposure and from one client address; Burst is both buckets' size.
	RatePerExposure, RatePerSource rate.Limit
	Burst                          int
	Now                            func() time.Time
	Log                            *slog.Logger
}

// CheckAndSetDefaults fails on a missing required field and fills the
// defaults.
func (c *Config) CheckAndSetDefaults() error {
	switch {
	case c.Core == nil:
		return fmt.Errorf("%w: Core is required", ErrConfig)
	case c.Verdicts == nil:
		return fmt.Errorf("%w: Verdicts is required", ErrConfig)
	case c.Links == nil:
		return fmt.Errorf("%w: Links is required", ErrConfig)
	case c.TLS == nil:
		return fmt.Errorf("%w: TLS is required", ErrConfig)
	}
	c.Domain = strings.Trim(strings.ToLower(c.Domain), ".")
	if c.Domain == "" {
		return fmt.Errorf("%w: Domain is required", ErrConfig)
	}
	if len(c.CookieKey) == 0 {
		c.CookieKey = make([]byte, 32)
		_, _ = rand.Read(c.CookieKey)
	} else if err := checkCookieKey(c.CookieKey); err != nil {
		return err
	}
	if c.CookieTTL <= 0 {
		c.CookieTTL = DefaultCookieTTL
	}
	if c.RatePerExposure <= 0 {
		c.RatePerExposure = DefaultRatePerExposure
	}
	if c.RatePerSource <= 0 {
		c.RatePerSource = DefaultRatePerSource
	}
	if c.Burst <= 0 {
		c.Burst = DefaultBurst
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.Log == nil {
		c.Log = slog.Default()
	}
	return nil
}
