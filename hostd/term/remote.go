package term

import (
	"errors"
	"sync"

	"github.com/gliderlabs/ssh"
	gossh "golang.org/x/crypto/ssh"

	"github.com/gpuaas/gpuaas/internal/sshcert"
	"github.com/gpuaas/gpuaas/internal/sshwire"
)

// handleForward serves the global requests of remote forwarding (ssh -R)
// on an SSH connection.
func (s *Server) handleForward(ctx ssh.Context, _ *ssh.Server, req *gossh.Request) (bool, []byte) {
	sc, _ := ctx.Value(ssh.ContextKeyConn).(*gossh.ServerConn)
	if sc == nil {
		return false, nil
	}
	c, err := s.connOf(ctx, sc)
	return s.forward(c, err, req)
}

// forward serves a tcpip-forward or cancel-tcpip-forward request of c, an
// SSH connection or a link; err is why c has no target. They need the
// permit-port-forwarding extension, and the target decides.
func (s *Server) forward(c *conn, err error, req *gossh.Request) (bool, []byte) {
	if err != nil {
		s.cfg.Log.Info("terminal request refused", "type", req.Type, "err", err)
		return false, nil
	}
	if !c.permits(sshcert.ExtensionPermitPortForwarding) {
		s.cfg.Log.Info("terminal request refused", "type", req.Type, "err", ErrForwardDenied)
		return false, nil
	}
	if req.Type == sshwire.CancelForwardRequest {
		return c.target.cancelForward(req.Payload), nil
	}
	return c.target.forward(req.Payload)
}

// localForwards is what a bare-metal target keeps of its connection's
// remote forwards: listeners on the node's loopback (sshwire's policy:
// 127.0.0.1 and ::1, ports from 1024), each connection to them opened
// towards the client as a forwarded-tcpip channel. They are closed with
// the connection.
type localForwards struct {
	// mu protects fwds.
	mu   sync.Mutex
	fwds *sshwire.RemoteForwards
}

func (t *execTarget) forward(payload []byte) (bool, []byte) {
	t.rf.mu.Lock()
	if t.rf.fwds == nil {
		t.rf.fwds = sshwire.NewRemoteForwards(func(extra []byte) (gossh.Channel, <-chan *gossh.Request, error) {
			return t.sc.OpenChannel(sshwire.ForwardedChannel, extra)
		})
	}
	fwds := t.rf.fwds
	t.rf.mu.Unlock()
	port, err := fwds.Forward(payload)
	if err != nil {
		t.s.cfg.Log.Info("remote forward refused", "user", t.acct.Name, "err", err)
		return false, nil
	}
	t.s.cfg.Log.Info("remote forward", "user", t.acct.Name, "port", port)
	return true, sshwire.ForwardReply(payload, port)
}

func (t *execTarget) cancelForward(payload []byte) bool {
	t.rf.mu.Lock()
	fwds := t.rf.fwds
	t.rf.mu.Unlock()
	if fwds == nil {
		return false
	}
	if err := fwds.Cancel(payload); err != nil {
		t.s.cfg.Log.Info("remote forward not cancelled", "user", t.acct.Name, "err", err)
		return false
	}
	return true
}

func (t *execTarget) close() {
	t.rf.mu.Lock()
	defer t.rf.mu.Unlock()
	if t.rf.fwds == nil {
		// Later requests find it closed.
		t.rf.fwds = sshwire.NewRemoteForwards(nil)
	}
	t.rf.fwds.Close()
	_ = t.env.Close()
}

// forward asks the VM's sshd to listen (on the VM's loopback, by its own
// policy) and notes what it granted: only forwarded-tcpip channels for
// those are let through to the client.
func (v *hopTarget) forward(payload []byte) (bool, []byte) {
	client, err := v.dialVM()
	if err != nil {
		v.s.cfg.Log.Info("remote forward refused", "allocation", v.ticket.Allocation, "err", err)
		return false, nil
	}
	ok, reply, err := client.SendRequest(sshwire.ForwardRequest, true, payload)
	if err != nil || !ok {
		v.s.cfg.Log.Info("remote forward refused by the VM", "allocation", v.ticket.Allocation, "err", err)
		return false, nil
	}
	v.fwds.Granted(payload, reply)
	return true, reply
}

func (v *hopTarget) cancelForward(payload []byte) bool {
	client, err := v.dialVM()
	if err != nil {
		return false
	}
	ok, _, err := client.SendRequest(sshwire.CancelForwardRequest, true, payload)
	if err == nil && ok {
		v.fwds.Canceled(payload)
	}
	return err == nil && ok
}

// serveVMChannels relays the channels the VM opens towards the client:
// forwarded-tcpip for a forward the client was granted, the agent's once a
// session's agent request was granted. Anything else is refused by the
// client connection (gossh.NewClient).
func (v *hopTarget) serveVMChannels(client *gossh.Client) {
	fwd := client.HandleChannelOpen(sshwire.ForwardedChannel)
	agent := client.HandleChannelOpen(sshwire.AgentChannel)
	go func() {
		for nc := range fwd {
			if _, ok := v.fwds.Allows(nc.ExtraData()); !ok {
				_ = nc.Reject(gossh.Prohibited, "no such remote forward")
				continue
			}
			go func() {
				_, _ = sshwire.JoinChannel(nc, func() (gossh.Channel, <-chan *gossh.Request, error) {
					return v.sc.OpenChannel(sshwire.ForwardedChannel, nc.ExtraData())
				})
			}()
		}
	}()
	go func() {
		for nc := range agent {
			if !v.agent.Load() {
				_ = nc.Reject(gossh.Prohibited, "agent forwarding was not requested")
				continue
			}
			go func() {
				_, _ = sshwire.JoinChannel(nc, func() (gossh.Channel, <-chan *gossh.Request, error) {
					return v.sc.OpenChannel(sshwire.AgentChannel, nil)
				})
			}()
		}
	}()
}

// startAgent makes the session's agent socket (ssh -A) for the account:
// its connections are opened towards the client as agent channels. The
// socket and its directory go when the session does.
func (l *execSession) startAgent() error {
	if l.agent != nil || l.started {
		return errors.New("agent forwarding: already requested, or asked after the session started")
	}
	a, err := sshwire.ListenAgent(l.t.acct.Credential)
	if err != nil {
		return err
	}
	sc := l.t.sc
	go a.Serve(func() (gossh.Channel, <-chan *gossh.Request, error) {
		return sc.OpenChannel(sshwire.AgentChannel, nil)
	})
	l.agent = a
	return nil
}
