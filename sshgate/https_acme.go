package sshgate

import (
	"crypto/tls"
	"fmt"
	"net"
	"strings"

	"github.com/gpuaas/gpuaas/gateway/httpfront"
	"github.com/gpuaas/gpuaas/internal/gateproto"
)

// checkACMEAndCookieKey checks the HTTPS front's ACME settings (one
// source of certificates) and loads the cookie key file.
func (h *HTTPS) checkACMEAndCookieKey() error {
	if h.ACME.CA != "" {
		if h.CertFile != "" || h.KeyFile != "" {
			return fmt.Errorf("sshgate config: %w: HTTPS takes ACME or CertFile and KeyFile, not both", ErrConfig)
		}
		if !strings.HasPrefix(h.ACME.CA, "https://") {
			return fmt.Errorf("sshgate config: %w: HTTPS ACME CA %q is not an https URL", ErrConfig, h.ACME.CA)
		}
		if h.ACME.Dir == "" {
			return fmt.Errorf("sshgate config: %w: HTTPS ACME needs a storage directory", ErrConfig)
		}
	}
	if h.CookieKeyFile != "" {
		key, err := httpfront.LoadCookieKey(h.CookieKeyFile)
		if err != nil {
			return fmt.Errorf("sshgate config: %w", err)
		}
		h.CookieKey = key
	}
	return nil
}

// httpsTLS is the front's TLS: from ACME when configured (challenges
// answered on ln), else the configured certificate. stop ends ACME's
// maintenance.
func (g *Gateway) httpsTLS(ln net.Listener) (cfg *tls.Config, stop func(), err error) {
	h := g.cfg.HTTPS
	if h.ACME.CA == "" {
		return h.TLS, func() {}, nil
	}
	a := h.ACME
	a.Domain, a.Addr = h.Domain, ln.Addr()
	if a.Verdicts == nil {
		a.Verdicts = gateproto.Front{Client: g.cfg.Client}
	}
	if a.Log == nil {
		a.Log = g.log.With("front", "https")
	}
	m, err := httpfront.NewACME(a)
	if err != nil {
		return nil, nil, fmt.Errorf("https acme: %w", err)
	}
	g.log.Info("https certificates from acme", "ca", a.CA, "dir", a.Dir)
	return m.TLSConfig(), m.Stop, nil
}
