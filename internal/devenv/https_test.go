package devenv_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"testing"

	"github.com/gpuaas/gpuaas/controld/controldtest"
	"github.com/gpuaas/gpuaas/internal/testutil"
)

// TestDevServesHTTPSWithItsCA: `gpuaas dev` serves the HTTPS front on
// *.localhost with a certificate its own CA signed: a client that trusts
// DevCAFile (the file the banner's trust line installs) gets the front's
// page for a name that is no exposure, over TLS it verified.
func TestDevServesHTTPSWithItsCA(t *testing.T) {
	env := start(t, t.TempDir(), testutil.Postgres(t, controldtest.Template), 0, "")
	if !strings.HasPrefix(env.AppsURL, "https://*.localhost:") {
		t.Fatalf("apps URL: got %q; want https://*.localhost:PORT", env.AppsURL)
	}
	pem, err := os.ReadFile(env.DevCAFile)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		t.Fatal("dev CA file holds no certificate")
	}
	// curl and browsers resolve *.localhost to loopback; Go's resolver
	// asks DNS, so the test dials loopback itself (the name still goes in
	// SNI and is what the certificate is checked against).
	_, port, _ := strings.Cut(strings.TrimPrefix(env.AppsURL, "https://*."), ":")
	c := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool},
		DialContext: func(ctx context.Context, network, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, network, "127.0.0.1:"+port)
		}}}
	url := strings.Replace(env.AppsURL, "*", "8888-a-000000000000", 1) + "/"
	resp, err := c.Get(url)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusNotFound || !strings.Contains(string(body), "No such exposure") {
		t.Fatalf("got %s %q; want the front's 404 page", resp.Status, body)
	}
}
