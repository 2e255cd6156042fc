package devenv

import (
	"crypto/x509"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gpuaas/gpuaas/internal/testutil"
)

// TestWebhookRoots: Config.WebhookCAFile's certificates verify webhook
// receivers; none given is the system's roots (nil), and a file that is
// missing or holds no PEM certificate is refused naming it.
func TestWebhookRoots(t *testing.T) {
	if pool, err := webhookRoots(""); pool != nil || err != nil {
		t.Fatalf("no file: %v, %v; want nil, nil (the system's roots)", pool, err)
	}
	files := testutil.TLS(t)
	pool, err := webhookRoots(files.CAFile)
	if err != nil || pool == nil || !pool.Equal(mustPool(t, files.CAPEM)) {
		t.Fatalf("%s: %v, %v; want a pool of that CA", files.CAFile, pool, err)
	}
	junk := filepath.Join(t.TempDir(), "junk.pem")
	if err := os.WriteFile(junk, []byte("not a certificate\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, bad := range []string{junk, filepath.Join(t.TempDir(), "missing.pem")} {
		if _, err := webhookRoots(bad); err == nil || !strings.Contains(err.Error(), "webhook CA file") {
			t.Errorf("%s: %v; want an error about the webhook CA file", bad, err)
		}
	}
	cfg := Config{DataDir: t.TempDir(), HTTPSACMECA: "http://127.0.0.1:14000/dir"}
	if err := cfg.CheckAndSetDefaults(); err == nil || !strings.Contains(err.Error(), "https URL") {
		t.Errorf("an http ACME CA: %v; want refused", err)
	}
	cfg = Config{DataDir: t.TempDir(), HTTPSACMECARoot: files.CAFile}
	if err := cfg.CheckAndSetDefaults(); err == nil || !strings.Contains(err.Error(), "needs HTTPSACMECA") {
		t.Errorf("an ACME root without a CA: %v; want refused", err)
	}
}

func mustPool(t *testing.T, pem []byte) *x509.CertPool {
	t.Helper()
	p := x509.NewCertPool()
	if !p.AppendCertsFromPEM(pem) {
		t.Fatalf("no certificate in %q", pem)
	}
	return p
}
