package core

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"

	gossh "golang.org/x/crypto/ssh"

	"github.com/gpuaas/gpuaas/internal/sshlink"
	"github.com/gpuaas/gpuaas/internal/sshwire"
)

// LoopbackHost is where OpenPort asks the node to connect: the
// allocation's own loopback, as `ssh -L port:localhost:port` would.
const LoopbackHost = "localhost"

// OpenPort authorizes g's user for the allocation, dials its node over
// the link and opens a TCP stream to port on the allocation's loopback
// (a direct-tcpip channel, which the node's terminal server allows or
// refuses as it does for ssh -L). Data moving either way counts as the
// allocation's activity. Closing the stream closes the channel and the
// link it was opened on (one link per stream: a front that wants to reuse
// links across requests pools Links from Authorize instead).
func (c *Core) OpenPort(ctx context.Context, g Grant, port uint16) (io.ReadWriteCloser, error) {
	if port == 0 {
		return nil, fmt.Errorf("open port of %s: port 0", g.AllocationID)
	}
	link, err := c.Authorize(ctx, g)
	if err != nil {
		return nil, err
	}
	// Nothing the node opens or asks on this link is wanted.
	go sshlink.DiscardRequests(link.Reqs)
	go func() {
		for nc := range link.Chans {
			_ = nc.Reject(gossh.Prohibited, "no channels towards an HTTPS stream")
		}
	}()
	ch, reqs, err := link.Conn.OpenChannel("direct-tcpip", gossh.Marshal(sshwire.DirectTCPIPMsg{
		DestAddr: LoopbackHost, DestPort: uint32(port), OriginAddr: "127.0.0.1", OriginPort: 0}))
	if err != nil {
		_ = link.Conn.Close()
		var open *gossh.OpenChannelError
		if errors.As(err, &open) {
			return nil, fmt.Errorf("open port %d of %s: the node refused: %s", port, g.AllocationID, open.Message)
		}
		return nil, fmt.Errorf("open port %d of %s: %w", port, g.AllocationID, err)
	}
	go sshlink.DiscardRequests(reqs)
	t := c.Track(g.AllocationID, nil)
	return &portStream{ch: ch, link: link.Conn, tracked: t}, nil
}

// portStream is a TCP stream to an allocation's port over its own link.
type portStream struct {
	ch      gossh.Channel
	link    gossh.Conn
	tracked *Tracked
	once    sync.Once
}

func (p *portStream) Read(b []byte) (int, error) {
	n, err := p.ch.Read(b)
	if n > 0 {
		Touch(p.tracked.Flag())
	}
	return n, err
}

func (p *portStream) Write(b []byte) (int, error) {
	n, err := p.ch.Write(b)
	if n > 0 {
		Touch(p.tracked.Flag())
	}
	return n, err
}

// Close closes the channel, then the link, once.
func (p *portStream) Close() error {
	var err error
	p.once.Do(func() {
		err = p.ch.Close()
		if lerr := p.link.Close(); err == nil {
			err = lerr
		}
		p.tracked.Close()
	})
	return err
}
