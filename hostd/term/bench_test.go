package term_test

import (
	"testing"

	gossh "golang.org/x/crypto/ssh"

	"github.com/gpuaas/gpuaas/internal/api"
)

// BenchmarkConnect times a connection to the terminal server as sshgate
// makes one (key exchange, the gateway certificate, a fresh ticket) and its
// first command, on loopback.
func BenchmarkConnect(b *testing.B) {
	h := newHarness(b, api.ShapeBaremetal)
	for b.Loop() {
		b.StopTimer()
		ticket := h.ticket(nil)
		b.StartTimer()
		c, err := h.dial(h.user, gossh.PublicKeys(ticket))
		if err != nil {
			b.Fatal(err)
		}
		if err := runTrue(c); err != nil {
			b.Fatal(err)
		}
		c.Close()
	}
}
