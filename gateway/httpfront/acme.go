package httpfront

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"log/slog"
	"net"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/caddyserver/certmagic"
	"github.com/mholt/acmez/v3"

	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/gateproto"
)

// ACMEConfig makes the front obtain a certificate per exposure name from
// an ACME CA (docs/decisions/0025-acme-certificates.md): on demand, at the
// first TLS handshake for <port>-<allocation>.<Domain>, and only for a
// name controld knows as a live exposure; validated by TLS-ALPN-01 on the
// front's own listener. CA, and Dir or Storage, are required; Domain,
// Verdicts and Addr are filled by the gateway.
type ACMEConfig struct {
	// CA is the ACME directory URL, e.g.
	// https://acme-v02.api.letsencrypt.org/directory.
	CA string
	// Email is the ACME account's contact (optional).
	Email string
	// CARootFile is a PEM file of roots to trust for the CA's own HTTPS
	// endpoint (a private CA, or Pebble in tests); empty: the system's.
	CARootFile string
	// Dir is where certificates, their keys and the ACME account key are
	// kept (a certmagic file storage, created 0700).
	Dir string
	// Domain is the apps domain; names directly under it are served.
	Domain string
	// Verdicts is asked whether a name is a live exposure before a
	// certificate is obtained for it.
	Verdicts Verdicts
	// Addr is the front's listener: TLS-ALPN-01 challenges are answered
	// there, by the certificate lookup of TLSConfig.
	Addr net.Addr
	// RenewalWindowRatio is the part of a certificate's life left when it
	// is renewed (certmagic's default, 1/3, when zero).
	RenewalWindowRatio float64
	// RenewCheckInterval is certmagic's maintenance period (default 10
	// minutes); a certificate with less than five of them left is renewed
	// at its next handshake whatever the ratio (short-lived certificates
	// in tests want a short one).
	RenewCheckInterval time.Duration
	// IgnoreARI renews by RenewalWindowRatio alone, ignoring the renewal
	// window the CA suggests (ACME Renewal Information, RFC 9773).
	IgnoreARI bool
	// AskRate and AskBurst bound how often controld is asked about names
	// without a certificate (DefaultACMEAskRate, DefaultACMEAskBurst when
	// zero); RefusedFor is how long a name controld refused is refused
	// without asking again (DefaultACMERefusedFor when zero).
	AskRate    float64
	AskBurst   int
	RefusedFor time.Duration
	// Now is the clock of the refused names and the rate (time.Now when
	// nil).
	Now func() time.Time
	Log *slog.Logger
}

// ACME obtains and renews the front's certificates.
type ACME struct {
	cfg   ACMEConfig
	cache *certmagic.Cache
	magic *certmagic.Config
	guard *acmeGuard
}

// NewACME sets up certificate management; nothing is obtained before a
// handshake asks for a name. Stop ends it.
func NewACME(c ACMEConfig) (*ACME, error) {
	c.Domain = strings.Trim(strings.ToLower(c.Domain), ".")
	switch {
	case c.CA == "":
		return nil, fmt.Errorf("%w: ACME needs the CA's directory URL", ErrConfig)
	case !strings.HasPrefix(c.CA, "https://"):
		return nil, fmt.Errorf("%w: ACME CA %q is not an https URL", ErrConfig, c.CA)
	case c.Dir == "":
		return nil, fmt.Errorf("%w: ACME needs a storage directory", ErrConfig)
	case c.Domain == "":
		return nil, fmt.Errorf("%w: ACME needs the apps domain", ErrConfig)
	case c.Verdicts == nil:
		return nil, fmt.Errorf("%w: ACME needs Verdicts", ErrConfig)
	case c.Addr == nil:
		return nil, fmt.Errorf("%w: ACME needs the front's listener address", ErrConfig)
	}
	if c.Log == nil {
		c.Log = slog.Default()
	}
	if c.AskRate == 0 {
		c.AskRate = DefaultACMEAskRate
	}
	if c.AskBurst == 0 {
		c.AskBurst = DefaultACMEAskBurst
	}
	if c.RefusedFor == 0 {
		c.RefusedFor = DefaultACMERefusedFor
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	host, portStr, err := net.SplitHostPort(c.Addr.String())
	if err != nil {
		return nil, fmt.Errorf("acme listener address: %w", err)
	}
	port, err := strconv.Atoi(portStr)
	if err != nil {
		return nil, fmt.Errorf("acme listener port: %w", err)
	}
	var roots *x509.CertPool
	if c.CARootFile != "" {
		pemBytes, err := os.ReadFile(c.CARootFile)
		if err != nil {
			return nil, fmt.Errorf("acme ca root: %w", err)
		}
		roots = x509.NewCertPool()
		if !roots.AppendCertsFromPEM(pemBytes) {
			return nil, fmt.Errorf("%w: no PEM certificate in %s", ErrConfig, c.CARootFile)
		}
	}
	if err := os.MkdirAll(c.Dir, 0o700); err != nil {
		return nil, fmt.Errorf("acme storage: %w", err)
	}
	a := &ACME{cfg: c, guard: newACMEGuard(c.Now, c.AskRate, c.AskBurst, c.RefusedFor)}
	zl := zapToSlog(c.Log)
	a.cache = certmagic.NewCache(certmagic.CacheOptions{
		GetConfigForCert:   func(certmagic.Certificate) (*certmagic.Config, error) { return a.magic, nil },
		RenewCheckInterval: c.RenewCheckInterval,
		Logger:             zl,
	})
	a.magic = certmagic.New(a.cache, certmagic.Config{
		Storage:            &certmagic.FileStorage{Path: c.Dir},
		OnDemand:           &certmagic.OnDemandConfig{DecisionFunc: a.decide},
		RenewalWindowRatio: c.RenewalWindowRatio,
		DisableARI:         c.IgnoreARI,
		Logger:             zl,
	})
	issuer := certmagic.NewACMEIssuer(a.magic, certmagic.ACMEIssuer{
		CA: c.CA, TestCA: c.CA, Email: c.Email, Agreed: true, TrustedRoots: roots,
		// Only TLS-ALPN-01, answered on the front's own listener: the
		// solver finds the port taken by us and leaves the answer to
		// TLSConfig's certificate lookup.
		DisableHTTPChallenge: true, ListenHost: host, AltTLSALPNPort: port,
		Logger: zl,
	})
	a.magic.Issuers = []certmagic.Issuer{issuer}
	return a, nil
}

// TLSConfig serves each name the certificate obtained for it, and
// answers TLS-ALPN-01 challenges (the acme-tls/1 protocol).
func (a *ACME) TLSConfig() *tls.Config {
	return &tls.Config{GetCertificate: a.magic.GetCertificate, MinVersion: tls.VersionTLS12,
		NextProtos: []string{"h2", "http/1.1", acmez.ACMETLS1Protocol}}
}

// Stop ends certificate maintenance.
func (a *ACME) Stop() { a.cache.Stop() }

// decide lets a certificate be obtained (or renewed) for name only when it
// is an exposure name under the apps domain that controld knows as live:
// nobody can make the gateway spend the CA's rate limits on names of
// their choosing.
func (a *ACME) decide(ctx context.Context, name string) error {
	label, ok := strings.CutSuffix(strings.ToLower(strings.TrimSuffix(name, ".")), "."+a.cfg.Domain)
	if !ok || label == "" || strings.Contains(label, ".") {
		return fmt.Errorf("%s is not under %s", name, a.cfg.Domain)
	}
	if _, _, ok := api.ParseExposureHost(label); !ok {
		return fmt.Errorf("%s is not an exposure name", name)
	}
	if ok, why := a.guard.mayAsk(label); !ok {
		return fmt.Errorf("%s: not asked (%s)", name, why)
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	// No credential: a live exposure answers allow (public) or login.
	v, err := a.cfg.Verdicts.GateAuthorizeHTTP(ctx, gateproto.GateAuthorizeHTTPRequest{Host: label})
	if err != nil {
		return fmt.Errorf("ask about %s: %w", name, err)
	}
	if v.Verdict != gateproto.VerdictAllow && v.Verdict != gateproto.VerdictLogin {
		a.cfg.Log.Debug("acme: no certificate", "name", name, "verdict", v.Verdict)
		a.guard.refuse(label)
		return fmt.Errorf("%s: %s", name, v.Verdict)
	}
	return nil
}
