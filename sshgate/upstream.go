package sshgate

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"

	"github.com/charmbracelet/ssh"

	"github.com/gpuaas/gpuaas/gateway/core"
	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/sshcert"
	"github.com/gpuaas/gpuaas/internal/sshwire"
)

// connStateKey is the context key of a connection's connState.
type connStateKey struct{}

// connState is what the gateway keeps per client connection: the one SSH
// connection to the node that all the client's channels (sessions and
// port forwards) are multiplexed on. It is opened on the first channel
// that needs it and closed with the client's connection.
type connState struct {
	conn *trackedConn // the client's

	// mu protects the following. It is held while dialling, so the
	// channels of one connection wait for one authorization.
	mu     sync.Mutex
	up     *upstream
	err    error // why the connection to the node could not be made
	closed bool
}

// upstream is an authorized connection to a node's terminal server (the
// core's Link: a link or SSH, Config.NodeTransport), as the SSH front
// serves it. serveNodeChannels serves what the node opens and asks.
type upstream struct {
	*core.Link
	dead chan struct{} // closed when the connection to the node ends

	// fwds are the remote forwards the node granted the client; agent is
	// set once a session asked the node for the client's agent (remote.go).
	fwds  sshwire.ForwardSet
	agent atomic.Bool
}

func (st *connState) close() {
	st.mu.Lock()
	defer st.mu.Unlock()
	st.closed = true
	if st.up != nil {
		_ = st.up.Conn.Close()
	}
}

// upstreamFor returns the connection's link to the allocation's node,
// authorizing and dialling it on first use. A failure is kept: every later
// channel of the connection gets the same answer (reconnect to retry). A
// link that died (the node's terminal server restarted) is re-dialled.
func (g *Gateway) upstreamFor(ctx ssh.Context, id sshcert.Identity) (*upstream, error) {
	st, ok := ctx.Value(connStateKey{}).(*connState)
	if !ok {
		return nil, errors.New("no connection state")
	}
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.closed {
		return nil, errors.New("connection closed")
	}
	if st.err != nil {
		return nil, st.err
	}
	if st.up != nil {
		select {
		case <-st.up.dead:
			g.log.Info("connection to node lost; dialling again", "allocation", ctx.User(), "node", st.up.Auth.NodeID)
			st.up = nil
		default:
			return st.up, nil
		}
	}
	var up *upstream
	var err error
	onOwnStack(func() { up, err = g.dialNode(ctx, id, ctx.User()) })
	if err != nil {
		st.err = err
		return nil, err
	}
	g.serveNodeChannels(ctx, id, up)
	st.up = up
	return up, nil
}

// dialNode has the core authorize id for alloc and dial the node, with
// the certificate the connection authenticated with for controld to
// verify again.
func (g *Gateway) dialNode(ctx context.Context, id sshcert.Identity, alloc string) (*upstream, error) {
	link, err := g.core.Authorize(ctx, core.Grant{AllocationID: alloc, UserID: id.UserID, Certificate: presentedCert(ctx)})
	if err != nil {
		return nil, err
	}
	// dead is closed by serveNodeChannels' goroutine, which outlives the
	// connection no longer than it must.
	return &upstream{Link: link, dead: make(chan struct{})}, nil
}

// publicError is what the client is told about a failure to reach its
// allocation: the API's message (controld wrote it for users), or a
// generic line for anything internal.
func publicError(err error) error {
	var apiErr *api.Error
	if errors.As(err, &apiErr) {
		return apiErr
	}
	return errors.New("cannot reach the allocation's node right now; try again")
}
