package sshgate

import (
	"fmt"
	"time"

	"github.com/charmbracelet/ssh"
	gossh "golang.org/x/crypto/ssh"

	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/ids"
	"github.com/gpuaas/gpuaas/internal/sshcert"
	"github.com/gpuaas/gpuaas/internal/sshlink"
	"github.com/gpuaas/gpuaas/internal/sshwire"
)

// Remote forwarding (ssh -R) and agent forwarding (ssh -A) go the other
// way from everything else: the node opens channels towards the client.
// The gateway asks the node on the client's behalf (tcpip-forward, the
// session's auth-agent-req@openssh.com), and lets a channel the node
// opens through only when it answers one of those requests: a
// forwarded-tcpip channel for a forward the node granted, an agent channel
// once the client asked for its agent on this connection. Anything else
// the node opens is refused (gossh.Client's default).

// tcpipForward serves the client's tcpip-forward and cancel-tcpip-forward
// global requests: they need an allocation connection and the
// permit-port-forwarding extension, and go to the node unchanged (it
// listens on the allocation's loopback only). The reply is the node's.
func (g *Gateway) tcpipForward(ctx ssh.Context, _ *ssh.Server, req *gossh.Request) (bool, []byte) {
	alloc := ctx.User()
	id, err := g.identityOf(ctx)
	switch {
	case err != nil:
	case !ids.Valid(ids.Allocation, alloc):
		err = fmt.Errorf("remote forwarding needs an allocation: ssh -R ... <allocation-id>@gateway")
	case !permits(id, sshcert.ExtensionPermitPortForwarding):
		err = ErrNotPermitted
	}
	if err != nil {
		g.log.Info("remote forward refused", "user", alloc, "remote", ctx.RemoteAddr(), "err", err)
		return false, nil
	}
	up, err := g.upstreamFor(ctx, id)
	if err != nil {
		g.log.Warn("allocation refused", "allocation", alloc, "user", id.UserID, "err", err)
		return false, nil
	}
	var m sshwire.TCPIPForwardMsg
	_ = gossh.Unmarshal(req.Payload, &m)
	ok, reply, err := up.Conn.SendRequest(req.Type, true, req.Payload)
	if err != nil || !ok {
		g.log.Info("remote forward refused by the node", "type", req.Type, "allocation", alloc,
			"bind", m.BindAddr, "port", m.BindPort, "err", err)
		return false, nil
	}
	if req.Type == sshwire.CancelForwardRequest {
		up.fwds.Canceled(req.Payload)
	} else {
		up.fwds.Granted(req.Payload, reply)
	}
	g.log.Info("remote forward", "type", req.Type, "allocation", alloc, "user", id.UserID, "bind", m.BindAddr, "port", m.BindPort)
	return true, reply
}

// serveNodeChannels relays the channels the node opens on up towards the
// client's connection (see above), rejects any other, and refuses the
// node's global requests. It runs once per link to the node, before any
// request that could make the node open a channel. Its one goroutine (not
// gossh.NewClient's three, one per kind and one waiting for the end:
// BenchmarkIdleSessions) closes up.dead when the link ends, which is when
// the library closes both channels. On a link (sshlink's NotifyIncoming)
// the goroutine starts only when the node first opens or asks something,
// or the link ends: an idle session's link, where the node asks nothing,
// holds none (decision 0054).
func (g *Gateway) serveNodeChannels(ctx ssh.Context, id sshcert.Identity, up *upstream) {
	serve := func() { go g.nodeChannels(ctx, id, up) }
	if n, ok := up.Conn.(incomingNotifier); ok {
		n.NotifyIncoming(serve)
		return
	}
	serve()
}

// incomingNotifier is a connection that says when its incoming channels
// and requests first need a reader (internal/sshlink's links).
type incomingNotifier interface {
	NotifyIncoming(f func())
}

// nodeChannels is serveNodeChannels' goroutine.
func (g *Gateway) nodeChannels(ctx ssh.Context, id sshcert.Identity, up *upstream) {
	defer close(up.dead)
	client, _ := ctx.Value(ssh.ContextKeyConn).(gossh.Conn)
	chans, reqs := up.Chans, up.Reqs
	for chans != nil || reqs != nil {
		select {
		case req, ok := <-reqs:
			if !ok {
				reqs = nil
				continue
			}
			if req.WantReply {
				_ = sshlink.Reply(req, false, nil)
			}
		case nc, ok := <-chans:
			if !ok {
				chans = nil
				continue
			}
			g.nodeChannel(ctx, id, up, client, nc)
		}
	}
	_ = up.Conn.Wait()
}

// nodeChannel serves one channel the node opened: a forwarded-tcpip
// channel of a remote forward the node granted, or an agent channel of a
// session that asked for the client's agent, each towards client; any
// other is rejected.
func (g *Gateway) nodeChannel(ctx ssh.Context, id sshcert.Identity, up *upstream, client gossh.Conn, nc gossh.NewChannel) {
	switch {
	case client == nil:
		_ = nc.Reject(gossh.Prohibited, "no client connection")
	case nc.ChannelType() == sshwire.ForwardedChannel:
		m, ok := up.fwds.Allows(nc.ExtraData())
		if !ok {
			g.log.Warn("node opened a forwarded-tcpip channel nobody asked for", "node", up.Auth.NodeID, "addr", m.Addr, "port", m.Port)
			_ = nc.Reject(gossh.Prohibited, "no such remote forward")
			return
		}
		go g.forwardedTCPIP(ctx, id, client, nc, m)
	case nc.ChannelType() == sshwire.AgentChannel:
		if !up.agent.Load() {
			g.log.Warn("node opened an agent channel the client did not ask for", "node", up.Auth.NodeID)
			_ = nc.Reject(gossh.Prohibited, "agent forwarding was not requested")
			return
		}
		go func() {
			_, _ = sshwire.JoinChannel(nc, func() (gossh.Channel, <-chan *gossh.Request, error) {
				return client.OpenChannel(sshwire.AgentChannel, nil)
			})
		}()
	default:
		_ = nc.Reject(gossh.UnknownChannelType, "unknown channel type "+nc.ChannelType())
	}
}

// forwardedTCPIP carries one connection made to a remote forward on the
// allocation to the client, indexed as a forward session.
func (g *Gateway) forwardedTCPIP(ctx ssh.Context, id sshcert.Identity, client gossh.Conn, nc gossh.NewChannel, m sshwire.ForwardedTCPIPMsg) {
	g.bg.add()
	defer g.bg.done()
	alloc := ctx.User()
	target := fmt.Sprintf("-R %s:%d from %s:%d", m.Addr, m.Port, m.OriginAddr, m.OriginPort)
	sessionID, err := g.startIndex(ctx, id, alloc, api.SessionForward, target)
	if err != nil {
		g.log.Error("forward not indexed; refusing it", "allocation", alloc, "err", err)
		_ = nc.Reject(gossh.ResourceShortage, "cannot record this connection right now")
		return
	}
	act := g.core.Track(alloc, nil)
	defer act.Close()
	start := time.Now()
	bytes, err := sshwire.JoinChannel(nc, func() (gossh.Channel, <-chan *gossh.Request, error) {
		ch, reqs, err := client.OpenChannel(sshwire.ForwardedChannel, nc.ExtraData())
		if err != nil {
			return nil, nil, err
		}
		return touchingChannel{Channel: ch, touched: act.Flag()}, reqs, nil
	})
	if err != nil {
		g.log.Info("remote forward connection refused by the client", "allocation", alloc, "target", target, "err", err)
	} else {
		g.log.Info("remote forward connection end", "allocation", alloc, "session", sessionID, "target", target,
			"bytes", bytes, "duration", time.Since(start).Round(time.Millisecond))
	}
	g.finishSession(sessionID, nil, sessionResult{bytes: bytes})
}
