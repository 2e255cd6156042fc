package term

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	gossh "golang.org/x/crypto/ssh"

	"github.com/gpuaas/gpuaas/hostd/env"
	"github.com/gpuaas/gpuaas/internal/sshcert"
	"github.com/gpuaas/gpuaas/internal/sshlink"
	"github.com/gpuaas/gpuaas/internal/sshwire"
)

// hopTarget serves a slice allocation through one SSH connection into its
// VM (its environment's Hop: the per-VM key, as the POSIX user), made on
// the first channel and shared by the connection's channels.
type hopTarget struct {
	s      *Server
	c      *conn
	hop    env.Hopper
	env    env.Environment
	ticket sshcert.Ticket
	ctx    context.Context
	sc     gossh.Conn // the client's connection

	// fwds are the remote forwards the VM granted; agent is set once it
	// granted a session's agent request.
	fwds  sshwire.ForwardSet
	agent atomic.Bool

	once   sync.Once
	client *gossh.Client
	err    error
}

// dialVM connects to the VM; the first outcome is kept for the connection.
func (v *hopTarget) dialVM() (*gossh.Client, error) {
	v.once.Do(func() { v.client, v.err = v.connect() })
	return v.client, v.err
}

func (v *hopTarget) connect() (*gossh.Client, error) {
	cc, chans, reqs, err := v.hop.Hop(v.ctx)
	if err != nil {
		return nil, err
	}
	// The VM may open channels towards us: forwarded-tcpip and the
	// agent's are relayed when the client asked for them; any other
	// (x11, ...) is refused by NewClient's handling.
	client := gossh.NewClient(cc, chans, reqs)
	v.serveVMChannels(client)
	return client, nil
}

// DialVM opens an SSH connection into allocation alloc's VM as user, the
// way the terminal hops in: with the per-VM key, checking the VM's pinned
// host key (env.Factory.VM). hostd's guest telemetry (hostd/agent) runs
// nvidia-smi in the VM through it. The VM may not open channels towards
// the caller.
func (s *Server) DialVM(ctx context.Context, alloc, user string) (*gossh.Client, error) {
	hop, ok := s.envs.VM(alloc, user).(env.Hopper)
	if !ok {
		return nil, fmt.Errorf("%w: %s's VM cannot be hopped into", ErrNotProvisioned, alloc)
	}
	cc, chans, reqs, err := hop.Hop(ctx)
	if err != nil {
		return nil, err
	}
	return gossh.NewClient(cc, chans, reqs), nil
}

func (v *hopTarget) close() {
	v.once.Do(func() { v.err = errors.New("connection closed") })
	if v.client != nil {
		_ = v.client.Close()
	}
	_ = v.env.Close()
}

func (v *hopTarget) session(nc gossh.NewChannel) {
	client, err := v.dialVM()
	if err != nil {
		v.s.refuseChannel(nc, gossh.ConnectionFailed, "session", err)
		return
	}
	vch, vreqs, err := client.OpenChannel("session", nil)
	if err != nil {
		v.s.refuseChannel(nc, gossh.ConnectionFailed, "session", err)
		return
	}
	ch, reqs, err := nc.Accept()
	if err != nil {
		_ = vch.Close()
		return
	}
	v.relaySession(ch, reqs, vch, vreqs)
}

// relaySession joins the client's session channel to one in the VM: the
// allowed requests go in (with the VM's answer coming back), exit-status
// and exit-signal come out, data flows both ways, and each side's EOF and
// close reach the other.
func (v *hopTarget) relaySession(ch gossh.Channel, reqs <-chan *gossh.Request, vch gossh.Channel, vreqs <-chan *gossh.Request) {
	// replying is held while a request is relayed and answered: the
	// client's channel is closed only once the VM's answer to a request
	// in flight (exec of a command that ends at once) reached the client,
	// who would otherwise see EOF instead of the reply and exit status.
	var replying sync.Mutex
	go func() {
		for req := range reqs {
			replying.Lock()
			ok := false
			switch {
			case !sessionRequestAllowed(v.c, req):
			case req.Type == "window-change" || req.Type == "signal":
				// Sent without asking for a reply (RFC 4254), as some
				// servers never answer these: a client that asks is
				// answered here.
				_, err := vch.SendRequest(req.Type, false, req.Payload)
				ok = err == nil
			default:
				var err error
				if ok, err = vch.SendRequest(req.Type, req.WantReply || req.Type == sshwire.AgentRequest, req.Payload); err != nil {
					ok = false
				}
				if ok && req.Type == sshwire.AgentRequest {
					v.agent.Store(true)
				}
			}
			if !ok {
				logRefused(v.s.cfg.Log, req, "allocation", v.ticket.Allocation)
			}
			if req.WantReply {
				_ = sshlink.Reply(req, ok, nil)
			}
			replying.Unlock()
		}
		// The client closed its channel: so does the VM's.
		_ = vch.Close()
	}()
	fromVM := make(chan struct{})
	go func() {
		defer close(fromVM)
		for req := range vreqs {
			switch req.Type {
			case "exit-status", "exit-signal":
				_, _ = ch.SendRequest(req.Type, false, req.Payload)
			default: // keepalive@openssh.com, eow@openssh.com, ...
				if req.WantReply {
					_ = sshlink.Reply(req, false, nil)
				}
			}
		}
	}()
	go sshwire.CopyHalf(vch, ch)
	var out sync.WaitGroup
	out.Add(2)
	go func() { defer out.Done(); _, _ = sshwire.Copy(ch, vch) }()
	go func() { defer out.Done(); _, _ = sshwire.Copy(ch.Stderr(), vch.Stderr()) }()
	out.Wait()
	_ = ch.CloseWrite()
	// The VM's requests end when it closes the channel, after its exit
	// status: only then is the client's channel closed, once a request
	// being relayed has its answer (the VM's channel is closed, so a
	// relayed request ends at once).
	<-fromVM
	replying.Lock()
	_ = ch.Close()
	replying.Unlock()
}

func (v *hopTarget) directTCPIP(nc gossh.NewChannel, d sshwire.DirectTCPIPMsg) {
	client, err := v.dialVM()
	if err != nil {
		v.s.refuseChannel(nc, gossh.ConnectionFailed, "direct-tcpip", err)
		return
	}
	// The VM's sshd applies its own policy: inside the VM the user may
	// reach whatever the VM can, so the same request is made there.
	vch, vreqs, err := client.OpenChannel("direct-tcpip", gossh.Marshal(d))
	if err != nil {
		var oce *gossh.OpenChannelError
		if errors.As(err, &oce) {
			v.s.cfg.Log.Info("terminal channel refused by the VM", "type", "direct-tcpip", "err", err)
			_ = nc.Reject(oce.Reason, oce.Message)
			return
		}
		v.s.refuseChannel(nc, gossh.ConnectionFailed, "direct-tcpip", err)
		return
	}
	go sshlink.DiscardRequests(vreqs)
	_, _ = sshwire.AcceptAndSplice(nc, vch)
}
