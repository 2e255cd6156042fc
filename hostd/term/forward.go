package term

import (
	"errors"
	"fmt"
	"net"

	gossh "golang.org/x/crypto/ssh"

	"github.com/gpuaas/gpuaas/internal/sshwire"
)

// directTCPIP serves ssh -L on bare metal under sshwire's loopback
// policy: only the node's own loopback, named as "localhost", 127.0.0.0/8
// or ::1. The user already has a shell on the node and can reach whatever
// it can; hostd (root) is not to be a hop to other hosts' services from
// inside the fleet's network.
func (t *localTarget) directTCPIP(nc gossh.NewChannel, d sshwire.DirectTCPIPMsg) {
	c, err := sshwire.DialLoopback(t.ctx, d, t.s.dial)
	switch {
	case errors.Is(err, sshwire.ErrNotLoopback):
		t.s.refuseChannel(nc, gossh.Prohibited, "direct-tcpip", fmt.Errorf("%w: %w", ErrForwardDenied, err))
		return
	case err != nil:
		t.s.refuseChannel(nc, gossh.ConnectionFailed, "direct-tcpip", err)
		return
	}
	_, _ = sshwire.AcceptAndSplice(nc, c.(*net.TCPConn))
}
