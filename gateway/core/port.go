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

// OpenPort authorizes g's user for the allocation with controld and
// opens a TCP stream to port on the allocation's loopback (a direct-tcpip
// channel, which the node's terminal server allows or refuses as it does
// for ssh -L). The channel is opened on a pooled link of the same
// allocation, node, POSIX user and login when one can take it, else on a
// link dialled with the ticket controld just gave (linkpool.go). Data
// moving either way counts as the allocation's activity. Closing the
// stream closes its channel; the link stays for the login's next streams
// until it is idle, too old, or the login ends.
func (c *Core) OpenPort(ctx context.Context, g Grant, port uint16) (io.ReadWriteCloser, error) {
	if port == 0 {
		return nil, fmt.Errorf("open port of %s: port 0", g.AllocationID)
	}
	d, err := c.decide(ctx, g)
	if err != nil {
		return nil, err
	}
	payload := gossh.Marshal(sshwire.DirectTCPIPMsg{
		DestAddr: LoopbackHost, DestPort: uint32(port), OriginAddr: "127.0.0.1", OriginPort: 0})
	for {
		pl, fresh, err := c.acquireLink(ctx, g, d)
		if err != nil {
			return nil, err
		}
		ch, reqs, err := pl.conn.OpenChannel("direct-tcpip", payload)
		if err != nil {
			var open *gossh.OpenChannelError
			if errors.As(err, &open) {
				c.links.release(pl, c.cfg.Now())
				return nil, fmt.Errorf("open port %d of %s: the node refused: %s", port, g.AllocationID, open.Message)
			}
			// The link broke: never again. A pooled one is retried once
			// on a link of this decision's own.
			c.links.kill(pl)
			if fresh {
				return nil, fmt.Errorf("open port %d of %s: %w", port, g.AllocationID, err)
			}
			continue
		}
		go sshlink.DiscardRequests(reqs)
		t := c.Track(g.AllocationID, nil)
		return &portStream{ch: ch, link: pl, core: c, tracked: t}, nil
	}
}

// portStream is a TCP stream to an allocation's port: a channel of a
// pooled link.
type portStream struct {
	ch      gossh.Channel
	link    *pooledLink
	core    *Core
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

// Close closes the channel and gives it back to its link, once.
func (p *portStream) Close() error {
	var err error
	p.once.Do(func() {
		err = p.ch.Close()
		if errors.Is(err, io.EOF) {
			err = nil // the node closed it first
		}
		p.core.links.release(p.link, p.core.cfg.Now())
		p.tracked.Close()
	})
	return err
}

// CopyStream copies src to dst until src's EOF or an error as the node's
// streams are relayed (sshwire.Copy): waiting for data with a 1 KiB
// buffer, holding a pooled large one only while bytes flow. The HTTPS
// front copies upgraded connections (WebSockets) with it.
func CopyStream(dst io.Writer, src io.Reader) (int64, error) { return sshwire.Copy(dst, src) }
