package sshgate

import (
	"context"
	"io"
	"strconv"
	"strings"
	"testing"
	"time"

	gossh "golang.org/x/crypto/ssh"

	"github.com/gpuaas/gpuaas/gateway/core"
	"github.com/gpuaas/gpuaas/internal/gateproto"
	"github.com/gpuaas/gpuaas/internal/sshtest"
)

// BenchmarkThroughput moves 64 MiB of command output to the client, through
// the gateway and directly from the same terminal server (with a ticket),
// in one run, so the two can be compared: b.SetBytes makes `go test -bench`
// print MB/s for each.
func BenchmarkThroughput(b *testing.B) {
	e := newEnv(b, envOptions{})
	u := e.newUser()
	alloc := e.addAlloc(u)
	const size = 64 << 20
	cmd := "head -c " + strconv.Itoa(size) + " /dev/zero"

	b.Run("gateway", func(b *testing.B) {
		c := e.dial(u, alloc)
		b.SetBytes(size)
		for b.Loop() {
			pull(b, c, cmd, size)
		}
	})
	b.Run("direct", func(b *testing.B) {
		// A ticket from controld, as the gateway gets one.
		k := sshtest.NewSigner(b)
		auth, err := gateproto.GateAuthorize(context.Background(), e.client, gateproto.GateAuthorizeRequest{AllocationID: alloc, UserID: u.id,
			TicketKey:   strings.TrimSpace(string(gossh.MarshalAuthorizedKey(k.PublicKey()))),
			Certificate: strings.TrimSpace(string(gossh.MarshalAuthorizedKey(u.cert)))})
		if err != nil {
			b.Fatal(err)
		}
		ticket, _, _, _, err := gossh.ParseAuthorizedKey([]byte(auth.Ticket))
		if err != nil {
			b.Fatal(err)
		}
		// The node asks for the gateway's certificate first.
		gateway, err := e.gw.core.GatewayCredential(time.Now())
		if err != nil {
			b.Fatal(err)
		}
		c, err := gossh.Dial("tcp", auth.TerminalAddr, &gossh.ClientConfig{User: auth.PosixUser,
			AuthCallback:    core.AuthSteps(gateway, sshtest.CertSigner(b, ticket.(*gossh.Certificate), k)),
			HostKeyCallback: gossh.FixedHostKey(e.hostd.hostKey.PublicKey())})
		if err != nil {
			b.Fatal(err)
		}
		defer c.Close()
		b.SetBytes(size)
		for b.Loop() {
			pull(b, c, cmd, size)
		}
	})
}

func pull(b *testing.B, c *gossh.Client, cmd string, size int64) {
	s, err := c.NewSession()
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	out, err := s.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	if err := s.Start(cmd); err != nil {
		b.Fatal(err)
	}
	if n, err := io.Copy(io.Discard, out); err != nil || n != size {
		b.Fatalf("got %d bytes, %v; want %d", n, err, size)
	}
	if err := s.Wait(); err != nil {
		b.Fatal(err)
	}
}
