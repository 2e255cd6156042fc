package sshgate

import (
	"errors"
	"net"
	"strconv"
	"time"

	"github.com/charmbracelet/ssh"
	gossh "golang.org/x/crypto/ssh"

	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/ids"
	"github.com/gpuaas/gpuaas/internal/sshcert"
	"github.com/gpuaas/gpuaas/internal/sshlink"
	"github.com/gpuaas/gpuaas/internal/sshwire"
)

// directTCPIP serves `ssh -L`: the channel is opened, unchanged, as a
// direct-tcpip channel on the link to the allocation's node, which decides
// what the destination may be (ports on the target). The gateway itself
// never dials the destination.
func (g *Gateway) directTCPIP(_ *ssh.Server, _ *gossh.ServerConn, newChan gossh.NewChannel, ctx ssh.Context) {
	g.bg.add()
	defer g.bg.done()
	id, err := g.identityOf(ctx)
	if err != nil {
		g.log.Warn("port forward refused", "user", ctx.User(), "remote", ctx.RemoteAddr(), "err", err)
		_ = newChan.Reject(gossh.Prohibited, "authentication no longer valid")
		return
	}
	alloc := ctx.User()
	if !ids.Valid(ids.Allocation, alloc) {
		_ = newChan.Reject(gossh.Prohibited, "port forwarding needs an allocation: ssh -L ... <allocation-id>@gateway")
		return
	}
	if !permits(id, sshcert.ExtensionPermitPortForwarding) {
		_ = newChan.Reject(gossh.Prohibited, ErrNotPermitted.Error())
		return
	}
	var dest sshwire.DirectTCPIPMsg
	if err := gossh.Unmarshal(newChan.ExtraData(), &dest); err != nil {
		_ = newChan.Reject(gossh.ConnectionFailed, "malformed direct-tcpip request")
		return
	}
	target := net.JoinHostPort(dest.DestAddr, strconv.FormatUint(uint64(dest.DestPort), 10))

	up, err := g.upstreamFor(ctx, id)
	if err != nil {
		g.log.Warn("allocation refused", "allocation", alloc, "user", id.UserID, "err", err)
		_ = newChan.Reject(gossh.ConnectionFailed, publicError(err).Error())
		return
	}
	sessionID, err := g.startIndex(ctx, id, alloc, api.SessionForward, target)
	if err != nil {
		g.log.Error("forward not indexed; refusing it", "allocation", alloc, "err", err)
		_ = newChan.Reject(gossh.ResourceShortage, "cannot record this connection right now; try again")
		return
	}
	nodeCh, nodeReqs, err := up.Conn.OpenChannel("direct-tcpip", newChan.ExtraData())
	if err != nil {
		var open *gossh.OpenChannelError
		if errors.As(err, &open) {
			_ = newChan.Reject(open.Reason, open.Message)
		} else {
			_ = newChan.Reject(gossh.ConnectionFailed, "the node did not open the connection")
		}
		g.finishSession(sessionID, nil, sessionResult{})
		return
	}
	ch, reqs, err := newChan.Accept()
	if err != nil {
		_ = nodeCh.Close()
		g.finishSession(sessionID, nil, sessionResult{})
		return
	}
	go sshlink.DiscardRequests(reqs)
	go sshlink.DiscardRequests(nodeReqs)

	g.log.Info("forward start", "allocation", alloc, "user", id.UserID, "target", target, "session", sessionID)
	start := time.Now()
	// Each direction passes its EOF on: a half-closed TCP connection stays
	// half-closed end to end.
	act := g.core.Track(alloc, nil)
	defer act.Close()
	bytes := sshwire.Splice(touchingChannel{Channel: ch, touched: act.Flag()}, nodeCh)
	g.log.Info("forward end", "allocation", alloc, "session", sessionID, "bytes", bytes,
		"duration", time.Since(start).Round(time.Millisecond))
	g.finishSession(sessionID, nil, sessionResult{bytes: bytes})
}
