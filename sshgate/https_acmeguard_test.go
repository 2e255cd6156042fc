package sshgate

import (
	"context"
	"crypto/x509"
	"net"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gpuaas/gpuaas/gateway/httpfront"
	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/gateproto"
	"github.com/gpuaas/gpuaas/internal/testutil"
)

// countedVerdicts is controld's client, counting the names the ACME
// front asks about.
type countedVerdicts struct {
	httpfront.Verdicts
	mu    sync.Mutex
	asked map[string]int
	total atomic.Int64
}

func (c *countedVerdicts) GateAuthorizeHTTP(ctx context.Context, req gateproto.GateAuthorizeHTTPRequest) (*gateproto.GateAuthorizeHTTPResponse, error) {
	c.total.Add(1)
	c.mu.Lock()
	c.asked[req.Host]++
	c.mu.Unlock()
	return c.Verdicts.GateAuthorizeHTTP(ctx, req)
}

// TestACMEHandshakesForUnknownNamesAreBounded: a TLS handshake for an
// exposure name without a certificate asks controld before it fails; a
// stranger sending ClientHellos with made-up names must not make the
// gateway ask controld once per handshake. A refused name is not asked
// about again while remembered, and asks beyond the rate are refused
// without asking (docs/expose.md, "Certificates from ACME").
func TestACMEHandshakesForUnknownNamesAreBounded(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	pebble := testutil.StartPebble(t, testutil.PebbleOptions{TLSPort: ln.Addr().(*net.TCPAddr).Port})
	var counted *countedVerdicts
	const burst, perSecond = 5, 1.0
	e := newEnv(t, envOptions{config: func(c *Config) {
		counted = &countedVerdicts{Verdicts: gateproto.Front{Client: c.Client}, asked: map[string]int{}}
		c.HTTPS = HTTPS{Listener: ln, Domain: acmeDomain, ACME: httpfront.ACMEConfig{CA: pebble.Directory,
			CARootFile: pebble.CAFile, Dir: filepath.Join(t.TempDir(), "acme"), Verdicts: counted,
			AskRate: perSecond, AskBurst: burst}}
	}})
	u := e.newUser()
	alloc := e.addAlloc(u)
	addr := e.gw.HTTPSAddr().String()
	roots := x509.NewCertPool() // trusts nothing: no handshake here may succeed

	// The same refused name, again and again: controld is asked once.
	same := api.ExposureHost(alloc, 2999) + "." + acmeDomain
	for range 10 {
		if _, err := handshake(addr, same, roots); err == nil {
			t.Fatalf("%s: a handshake succeeded", same)
		}
	}
	if n := counted.asked[api.ExposureHost(alloc, 2999)]; n != 1 {
		t.Errorf("controld asked about %s %d times in 10 handshakes; want once", same, n)
	}

	// Many different names at once: at most the burst and the rate.
	before := counted.total.Load()
	start := time.Now()
	for port := range 60 {
		name := api.ExposureHost(alloc, 3000+port) + "." + acmeDomain
		if _, err := handshake(addr, name, roots); err == nil {
			t.Fatalf("%s: a handshake succeeded", name)
		}
	}
	asked := counted.total.Load() - before
	bound := int64(burst) + int64(perSecond*time.Since(start).Seconds()) + 1
	if asked > bound {
		t.Errorf("60 handshakes for new names asked controld %d times; want at most %d (burst %d + %.0f/s)", asked, bound, burst, perSecond)
	}
	t.Logf("60 handshakes for unknown names: %d asks to controld (bound %d)", asked, bound)
}
