package term

import (
	"context"
	"errors"
	"fmt"

	gossh "golang.org/x/crypto/ssh"

	"github.com/gpuaas/gpuaas/hostd/env"
	"github.com/gpuaas/gpuaas/internal/sshlink"
	"github.com/gpuaas/gpuaas/internal/sshwire"
)

// execTarget serves an allocation whose environment runs its processes
// for hostd (env.Environment.Exec): a bare-metal allocation's POSIX user.
// The SSH protocol is served here; the processes, loopback dials and sftp
// are the environment's.
type execTarget struct {
	s    *Server
	c    *conn
	env  env.Environment
	acct Account // who the processes run as: the agent socket's owner
	ctx  context.Context
	sc   gossh.Conn // the client's connection
	rf   localForwards
}

func (t *execTarget) session(nc gossh.NewChannel) {
	ch, reqs, err := nc.Accept()
	if err != nil {
		return
	}
	l := &execSession{t: t, ch: ch}
	l.serve(reqs)
}

// execSession is one session channel. Its fields are used by the request
// loop only; the goroutine that waits for the program reports through the
// channel.
type execSession struct {
	t       *execTarget
	ch      gossh.Channel
	env     []string
	pty     *sshwire.PtyRequestMsg
	started bool
	proc    env.Process          // the program, once started
	agent   *sshwire.AgentSocket // ssh -A: the forwarded agent's socket
}

func (l *execSession) serve(reqs <-chan *gossh.Request) {
	for req := range reqs {
		ok, run := l.handle(req)
		if req.WantReply {
			_ = sshlink.Reply(req, ok, nil)
		}
		if !ok {
			logRefused(l.t.s.cfg.Log, req, "user", l.t.acct.Name)
		}
		if run != nil {
			go run()
		}
	}
	if l.proc != nil {
		l.proc.Hangup()
	}
	if l.agent != nil {
		_ = l.agent.Close()
	}
}

// handle answers one request; run, when not nil, is started after the
// reply and carries the program to its end.
func (l *execSession) handle(req *gossh.Request) (ok bool, run func()) {
	if !sessionRequestAllowed(l.t.c, req) {
		return false, nil
	}
	switch req.Type {
	case "env":
		var m sshwire.EnvMsg
		if l.started || len(l.env) >= maxEnv || gossh.Unmarshal(req.Payload, &m) != nil {
			return false, nil
		}
		l.env = append(l.env, m.Name+"="+m.Value)
		return true, nil
	case sshwire.AgentRequest:
		if err := l.startAgent(); err != nil {
			l.t.s.cfg.Log.Warn("agent forwarding refused", "user", l.t.acct.Name, "err", err)
			return false, nil
		}
		return true, nil
	case "pty-req":
		var m sshwire.PtyRequestMsg
		if l.started || l.pty != nil || gossh.Unmarshal(req.Payload, &m) != nil {
			return false, nil
		}
		l.pty = &m
		return true, nil
	case "window-change":
		var m sshwire.WindowChangeMsg
		if l.pty == nil || gossh.Unmarshal(req.Payload, &m) != nil {
			return false, nil
		}
		l.pty.Columns, l.pty.Rows, l.pty.Width, l.pty.Height = m.Columns, m.Rows, m.Width, m.Height
		if l.proc != nil {
			_ = l.proc.Resize(m.Columns, m.Rows, m.Width, m.Height)
		}
		return true, nil
	case "signal":
		var m sshwire.SignalMsg
		if gossh.Unmarshal(req.Payload, &m) != nil {
			return false, nil
		}
		sig, known := sshwire.Signal(m.Signal)
		if !known || l.proc == nil {
			return false, nil
		}
		return l.proc.Signal(sig), nil
	case "shell", "exec", "subsystem":
		if l.started {
			return false, nil
		}
		run, err := l.start(req)
		if err != nil {
			l.t.s.cfg.Log.Warn("terminal session did not start", "type", req.Type, "user", l.t.acct.Name, "err", err)
			return false, nil
		}
		l.started = true
		return true, run
	}
	return false, nil
}

// start starts the session's program in the environment: the login
// shell, a command through the shell, or sftp.
func (l *execSession) start(req *gossh.Request) (func(), error) {
	spec := env.ExecSpec{Env: l.env, Stdin: l.ch, Stdout: l.ch, Stderr: l.ch.Stderr()}
	switch req.Type {
	case "exec":
		var m sshwire.ExecMsg
		if err := gossh.Unmarshal(req.Payload, &m); err != nil {
			return nil, err
		}
		spec.Command = m.Command
	case "subsystem": // sftp, the only one sessionRequestAllowed lets through
		spec.Subsystem = "sftp"
	}
	if l.pty != nil {
		p := l.pty
		spec.PTY = &env.PTY{Term: p.Term, Columns: p.Columns, Rows: p.Rows, Width: p.Width, Height: p.Height, Modes: p.Modes}
	}
	if l.agent != nil {
		spec.AgentSocket = l.agent.Path
	}
	proc, err := l.t.env.Exec(l.t.ctx, spec)
	if err != nil {
		return nil, err
	}
	if spec.Subsystem != "" && l.t.acct.Credential != nil {
		// The environment ran sftp-server without a terminal (it speaks
		// binary): later window-changes are refused, as in a session
		// without one.
		l.pty = nil
	}
	l.proc = proc
	return func() { l.exit(proc.Wait()) }, nil
}

// exit reports how the program ended: EOF, the exit status (or signal),
// and the channel is closed.
func (l *execSession) exit(st env.ExitStatus) {
	_ = l.ch.CloseWrite()
	switch name := sshwire.SignalName(st.Signal); {
	case st.Signal != 0 && name != "":
		_, _ = l.ch.SendRequest("exit-signal", false, gossh.Marshal(&sshwire.ExitSignalMsg{Signal: name, CoreDumped: st.CoreDumped}))
	case st.Signal != 0:
		_, _ = l.ch.SendRequest("exit-status", false, gossh.Marshal(sshwire.ExitStatusMsg{Status: 128 + uint32(st.Signal)}))
	default:
		_, _ = l.ch.SendRequest("exit-status", false, gossh.Marshal(sshwire.ExitStatusMsg{Status: uint32(st.Code)}))
	}
	_ = l.ch.Close()
}

// directTCPIP serves ssh -L under the environment's loopback policy: only
// its own loopback, named as "localhost", 127.0.0.0/8 or ::1. The user
// already has a shell there and can reach whatever it can; hostd (root)
// is not to be a hop to other hosts' services from inside the fleet's
// network.
func (t *execTarget) directTCPIP(nc gossh.NewChannel, d sshwire.DirectTCPIPMsg) {
	c, err := t.env.DialLoopback(t.ctx, d.DestAddr, int(d.DestPort))
	switch {
	case errors.Is(err, env.ErrNotLoopback), errors.Is(err, env.ErrInvalidSpec):
		t.s.refuseChannel(nc, gossh.Prohibited, "direct-tcpip", fmt.Errorf("%w: %w", ErrForwardDenied, err))
		return
	case err != nil:
		t.s.refuseChannel(nc, gossh.ConnectionFailed, "direct-tcpip", err)
		return
	}
	hc, ok := c.(sshwire.HalfCloser)
	if !ok {
		_ = c.Close()
		t.s.refuseChannel(nc, gossh.ConnectionFailed, "direct-tcpip", fmt.Errorf("%T cannot half-close", c))
		return
	}
	_, _ = sshwire.AcceptAndSplice(nc, hc)
}
