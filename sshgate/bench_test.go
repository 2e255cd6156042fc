package sshgate

import (
	"io"
	"strconv"
	"testing"
	"time"

	gossh "golang.org/x/crypto/ssh"

	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/sshcert"
)

// BenchmarkThroughput moves 64 MiB of command output to the client, through
// the gateway and directly from the same terminal server (with a ticket),
// in one run, so the two can be compared: b.SetBytes makes `go test -bench`
// print MB/s for each.
func BenchmarkThroughput(b *testing.B) {
	e := newEnv(b, envOptions{})
	u := e.newUser()
	alloc := e.ctl.addAlloc(u.id)
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
		k := newSigner(b)
		ticket, err := e.ctl.intCA.SignTicket(k.PublicKey(), sshcert.Ticket{Node: e.ctl.node, Allocation: alloc,
			PosixUser: api.PosixUser(alloc), TTL: sshcert.MaxTicketTTL}, time.Now())
		if err != nil {
			b.Fatal(err)
		}
		c, err := gossh.Dial("tcp", e.hostd.addr, &gossh.ClientConfig{User: api.PosixUser(alloc),
			Auth: []gossh.AuthMethod{gossh.PublicKeys(certSigner(b, ticket, k))}, HostKeyCallback: gossh.InsecureIgnoreHostKey()})
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
