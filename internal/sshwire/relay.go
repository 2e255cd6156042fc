package sshwire

import (
	"errors"

	gossh "golang.org/x/crypto/ssh"

	"github.com/gpuaas/gpuaas/internal/sshlink"
)

// OpenFunc opens a channel on the far side of a relay.
type OpenFunc func() (gossh.Channel, <-chan *gossh.Request, error)

// JoinChannel relays nc (a channel the near side asked for) to one that
// open makes on the far side: when open fails, nc is rejected with the
// far side's reason (or ConnectionFailed); otherwise both are accepted
// and spliced until both directions are done. It returns the bytes
// carried.
func JoinChannel(nc gossh.NewChannel, open OpenFunc) (int64, error) {
	far, farReqs, err := open()
	if err != nil {
		var oce *gossh.OpenChannelError
		if errors.As(err, &oce) {
			_ = nc.Reject(oce.Reason, oce.Message)
		} else {
			_ = nc.Reject(gossh.ConnectionFailed, "the other side did not open the channel")
		}
		return 0, err
	}
	go sshlink.DiscardRequests(farReqs)
	return AcceptAndSplice(nc, far)
}
