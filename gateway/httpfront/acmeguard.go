package httpfront

import (
	"sync"
	"time"

	"golang.org/x/time/rate"
)

// Defaults of the guard in front of ACME's decisions (acmeGuard).
const (
	DefaultACMEAskRate    = 10              // controld asks per second for names without a certificate
	DefaultACMEAskBurst   = 50              // asks in a burst
	DefaultACMERefusedFor = 1 * time.Minute // how long a refused name is refused without asking
	acmeRefusedMax        = 10000           // refused names remembered at most
)

// acmeGuard bounds what TLS handshakes for names without a certificate
// cost: each would otherwise ask controld (gate.authorize_http) before the
// handshake fails, so a stranger sending ClientHellos with made-up
// exposure names could spend the gateway's request budget at controld. A
// name controld refused is refused again without asking for RefusedFor,
// and asks beyond a rate are refused outright (the handshake fails; a
// live exposure's certificate, once obtained, is served from the cache
// without any decision).
type acmeGuard struct {
	now        func() time.Time
	refusedFor time.Duration
	asks       *rate.Limiter

	mu      sync.Mutex
	refused map[string]time.Time // name → refused until
}

func newACMEGuard(now func() time.Time, perSecond float64, burst int, refusedFor time.Duration) *acmeGuard {
	return &acmeGuard{now: now, refusedFor: refusedFor, asks: rate.NewLimiter(rate.Limit(perSecond), burst),
		refused: map[string]time.Time{}}
}

// mayAsk reports whether controld may be asked about name now: not while
// it is remembered as refused, nor beyond the rate.
func (g *acmeGuard) mayAsk(name string) (ok bool, why string) {
	now := g.now()
	g.mu.Lock()
	until, seen := g.refused[name]
	if seen && now.After(until) {
		delete(g.refused, name)
		seen = false
	}
	g.mu.Unlock()
	if seen {
		return false, "refused a moment ago"
	}
	if !g.asks.AllowN(now, 1) {
		return false, "too many names without a certificate at once"
	}
	return true, ""
}

// refuse remembers name as refused. When the memory is full, expired
// entries go first, then everything (a flood of names cannot grow it).
func (g *acmeGuard) refuse(name string) {
	now := g.now()
	g.mu.Lock()
	defer g.mu.Unlock()
	if len(g.refused) >= acmeRefusedMax {
		for n, until := range g.refused {
			if now.After(until) {
				delete(g.refused, n)
			}
		}
		if len(g.refused) >= acmeRefusedMax {
			clear(g.refused)
		}
	}
	g.refused[name] = now.Add(g.refusedFor)
}
