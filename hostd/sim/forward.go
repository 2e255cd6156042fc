package sim

import (
	"sync"
	"syscall"

	"github.com/gliderlabs/ssh"
	gossh "golang.org/x/crypto/ssh"

	"github.com/gpuaas/gpuaas/internal/sshwire"
)

// guestForwards are a sim guest's remote forwards (ssh -R), per
// connection: listeners on the guest's loopback (the host's, under
// sshwire's policy), each connection opened towards the client as a
// forwarded-tcpip channel, all closed with the connection, as sshd does
// with GatewayPorts=no.
type guestForwards struct {
	// mu protects byConn.
	mu     sync.Mutex
	byConn map[gossh.Conn]*sshwire.RemoteForwards
}

func newGuestForwards() *guestForwards {
	return &guestForwards{byConn: map[gossh.Conn]*sshwire.RemoteForwards{}}
}

// handle serves tcpip-forward and cancel-tcpip-forward.
func (g *guestForwards) handle(ctx ssh.Context, _ *ssh.Server, req *gossh.Request) (bool, []byte) {
	conn, _ := ctx.Value(ssh.ContextKeyConn).(gossh.Conn)
	if conn == nil {
		return false, nil
	}
	g.mu.Lock()
	fwds := g.byConn[conn]
	if fwds == nil && req.Type == sshwire.ForwardRequest {
		fwds = sshwire.NewRemoteForwards(func(extra []byte) (gossh.Channel, <-chan *gossh.Request, error) {
			return conn.OpenChannel(sshwire.ForwardedChannel, extra)
		})
		g.byConn[conn] = fwds
		go func() {
			<-ctx.Done()
			g.mu.Lock()
			delete(g.byConn, conn)
			g.mu.Unlock()
			fwds.Close()
		}()
	}
	g.mu.Unlock()
	if fwds == nil {
		return false, nil
	}
	if req.Type == sshwire.CancelForwardRequest {
		return fwds.Cancel(req.Payload) == nil, nil
	}
	port, err := fwds.Forward(req.Payload)
	if err != nil {
		return false, nil
	}
	return true, sshwire.ForwardReply(req.Payload, port)
}

// listenAgent makes a session's agent socket for the guest user (cred nil:
// hostd's own user, a sandbox guest), its connections opened towards the
// client as agent channels.
func listenAgent(s ssh.Session, cred *syscall.Credential) (*sshwire.AgentSocket, error) {
	conn, _ := s.Context().Value(ssh.ContextKeyConn).(gossh.Conn)
	a, err := sshwire.ListenAgent(cred)
	if err != nil {
		return nil, err
	}
	go a.Serve(func() (gossh.Channel, <-chan *gossh.Request, error) {
		return conn.OpenChannel(sshwire.AgentChannel, nil)
	})
	return a, nil
}
