package sshgate

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gpuaas/gpuaas/gateway/httpfront"
	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/testutil"
)

// acmeDomain is the apps domain of the ACME tests: Pebble's validation
// resolves its names through the test's DNS, which answers 127.0.0.1.
const acmeDomain = "apps.gpuaas.test"

// handshake opens TLS to the front for name, trusting roots only, and
// returns the certificate it served.
func handshake(addr, name string, roots *x509.CertPool) (*x509.Certificate, error) {
	d := &net.Dialer{Timeout: 10 * time.Second}
	c, err := tls.DialWithDialer(d, "tcp", addr, &tls.Config{ServerName: name, RootCAs: roots})
	if err != nil {
		return nil, err
	}
	defer c.Close()
	return c.ConnectionState().PeerCertificates[0], nil
}

// TestHTTPSFrontACME: the front obtains a certificate from a real ACME
// server (Pebble) at the first handshake for an exposure's name, validated
// by TLS-ALPN-01 on the front's own listener; a client trusting only
// Pebble's root gets a verified connection and the renter's page. A name
// that is no live exposure gets no certificate, and Pebble is never asked
// to validate it. The certificates are short-lived: the front renews one
// while it runs, and serves the new one. A gateway restarted on the same
// storage serves the stored certificate without a new order.
func TestHTTPSFrontACME(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	const validity = 30 * time.Second
	pebble := testutil.StartPebble(t, testutil.PebbleOptions{TLSPort: ln.Addr().(*net.TCPAddr).Port, Validity: validity})
	dir := filepath.Join(t.TempDir(), "acme")
	e := newEnv(t, envOptions{config: func(c *Config) {
		c.HTTPS = HTTPS{Listener: ln, Domain: acmeDomain, ACME: httpfront.ACMEConfig{CA: pebble.Directory, CARootFile: pebble.CAFile,
			Email: "ops@example.test", Dir: dir, RenewalWindowRatio: 0.5, IgnoreARI: true, RenewCheckInterval: time.Second}}
	}})
	rootPEM, err := pebble.Root()
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(rootPEM) {
		t.Fatalf("pebble root: %q", rootPEM)
	}
	u := e.newUser()
	alloc := e.addAlloc(u)
	port, _ := renterServer(t)
	ctx := t.Context()
	ex, err := u.client.ExposeCreate(ctx, api.ExposeCreateRequest{Allocation: alloc, Port: int(port), Share: api.ShareMe})
	if err != nil {
		t.Fatal(err)
	}
	name := ex.Host + "." + acmeDomain
	addr := e.gw.HTTPSAddr().String()

	// The first handshake waits for the certificate to be obtained.
	first, err := handshake(addr, name, roots)
	if err != nil {
		t.Fatalf("handshake for %s: %v\npebble:\n%s", name, err, pebble.Log())
	}
	if !slices.Equal(first.DNSNames, []string{name}) {
		t.Fatalf("certificate names: got %v; want [%s]", first.DNSNames, name)
	}
	client := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots},
		DialContext: func(ctx context.Context, network, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, network, addr)
		}, ForceAttemptHTTP2: true}}
	t.Cleanup(client.CloseIdleConnections)
	req, _ := http.NewRequest(http.MethodGet, "https://"+name+"/notebook", nil)
	req.Header.Set("Authorization", "Bearer "+u.token)
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.HasPrefix(string(body), "hello /notebook") || resp.ProtoMajor != 2 {
		t.Fatalf("through the ACME certificate: got %s %s %q; want the renter's page over HTTP/2", resp.Proto, resp.Status, body)
	}

	t.Run("no certificate for a name that is not a live exposure", func(t *testing.T) {
		refused := []string{
			api.ExposureHost(alloc, 1999) + "." + acmeDomain, // not exposed
			"random." + acmeDomain,                           // not an exposure name
			"a.b." + acmeDomain,                              // not directly under the domain
			"elsewhere.example.test",                         // not under the domain
		}
		for _, bad := range refused {
			if c, err := handshake(addr, bad, roots); err == nil {
				t.Errorf("%s: got a certificate for %v; want none", bad, c.DNSNames)
			}
		}
		for _, q := range pebble.Queried() {
			if q != name {
				t.Errorf("pebble resolved %s: it was asked to validate a name that is no exposure", q)
			}
		}
		log := pebble.Log()
		for _, bad := range refused {
			if strings.Contains(log, bad) {
				t.Errorf("pebble saw an order for %s:\n%s", bad, log)
			}
		}
	})

	t.Run("renewal while the front runs", func(t *testing.T) {
		// Renewal starts at the first handshake inside the last half of
		// the certificate's life (by that ratio alone: Pebble's renewal
		// information would have it renewed at once, again and again) and
		// completes in the background; the front serves the old
		// certificate until then.
		var renewed *x509.Certificate
		testutil.EventuallyWithin(t, 3*validity, "a renewed certificate served", func() bool {
			c, err := handshake(addr, name, roots)
			if err != nil {
				t.Fatalf("handshake during renewal: %v", err)
			}
			renewed = c
			return c.SerialNumber.Cmp(first.SerialNumber) != 0 && c.NotAfter.After(first.NotAfter)
		})
		// Pebble dates a certificate from its issuance: the renewal was
		// not asked for before the window opened (second precision).
		if opened := first.NotBefore.Add(validity / 2).Add(-time.Second); renewed.NotBefore.Before(opened) {
			t.Errorf("renewed certificate issued at %s; want not before %s (half the first one's life)", renewed.NotBefore, opened)
		}
	})

	t.Run("a restarted gateway serves the stored certificate", func(t *testing.T) {
		// Just renewed: no renewal runs for half the certificate's life.
		e.stop()
		stored := storedCert(t, dir, name)
		orders := strings.Count(pebble.Log(), "Added order")
		ln2, err := net.Listen("tcp", addr) // Pebble validates on this port
		if err != nil {
			t.Fatal(err)
		}
		// Renewal only in the last 1% of a certificate's life: this
		// handshake must be served from storage, not by a new order.
		gw := e.replica("sshgate-2", HTTPS{Listener: ln2, Domain: acmeDomain, ACME: httpfront.ACMEConfig{CA: pebble.Directory,
			CARootFile: pebble.CAFile, Dir: dir, RenewalWindowRatio: 0.01, IgnoreARI: true, RenewCheckInterval: time.Second}})
		c, err := handshake(gw.HTTPSAddr().String(), name, roots)
		if err != nil {
			t.Fatal(err)
		}
		if c.SerialNumber.Cmp(stored.SerialNumber) != 0 {
			t.Errorf("after a restart: served serial %x; want the stored %x", c.SerialNumber, stored.SerialNumber)
		}
		if n := strings.Count(pebble.Log(), "Added order"); n != orders {
			t.Errorf("after a restart: %d new orders at pebble; want none", n-orders)
		}
	})
}

// storedCert is the certificate for name in the ACME storage dir.
func storedCert(t *testing.T, dir, name string) *x509.Certificate {
	t.Helper()
	var found *x509.Certificate
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.Name() != name+".crt" {
			return err
		}
		raw, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		b, _ := pem.Decode(raw)
		if b == nil {
			return fmt.Errorf("%s: no PEM", p)
		}
		found, err = x509.ParseCertificate(b.Bytes)
		return err
	})
	if err != nil || found == nil {
		t.Fatalf("stored certificate of %s in %s: %v", name, dir, err)
	}
	return found
}
