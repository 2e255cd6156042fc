package devenv

import (
	"crypto/x509"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/gpuaas/gpuaas/gateway/httpfront"
	"github.com/gpuaas/gpuaas/sshgate"
)

// DevDomain is the apps domain of `gpuaas dev`: curl and browsers resolve
// every *.localhost name to loopback.
const DevDomain = "localhost"

// prepareHTTPS makes (or reads) the dev CA in DataDir/https-ca and takes
// the HTTPS front's loopback port (HTTPSPort, 0: any free one), held
// until the gateway serves on it, so controld can be told the exposures'
// URL pattern first (docs/expose.md).
func (e *Env) prepareHTTPS() error {
	ca, err := httpfront.LoadOrCreateDevCA(filepath.Join(e.cfg.DataDir, "https-ca"), time.Now())
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(e.cfg.HTTPSPort)))
	if err != nil {
		return fmt.Errorf("https front: cannot listen on 127.0.0.1:%d (%v): pick another port", e.cfg.HTTPSPort, err)
	}
	e.onClose("", func() error { _ = ln.Close(); return nil })
	port := ln.Addr().(*net.TCPAddr).Port
	e.AppsURL = fmt.Sprintf("https://*.%s:%d", DevDomain, port)
	e.DevCAFile = ca.CertFile
	e.https = sshgate.HTTPS{Listener: ln, Domain: DevDomain, TLS: ca.TLSConfig(DevDomain, time.Now)}
	if e.cfg.HTTPSACMECA != "" {
		// Certificates from an ACME CA instead (the gateway's
		// --https-acme-ca, docs/expose.md): the dev CA is not used.
		e.https.TLS, e.DevCAFile = nil, ""
		e.https.ACME = httpfront.ACMEConfig{CA: e.cfg.HTTPSACMECA, CARootFile: e.cfg.HTTPSACMECARoot,
			Dir: filepath.Join(e.cfg.DataDir, "https-acme")}
	}
	return nil
}

// webhookRoots are the roots verifying webhook receivers: those of
// Config.WebhookCAFile, or nil for the system's.
func webhookRoots(file string) (*x509.CertPool, error) {
	if file == "" {
		return nil, nil
	}
	pem, err := os.ReadFile(file)
	if err != nil {
		return nil, fmt.Errorf("webhook CA file: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("webhook CA file: %s holds no PEM certificate", file)
	}
	return pool, nil
}

// httpsSettings are the gateway's HTTPS front settings devenv passes on.
type httpsSettings = sshgate.HTTPS
