package term

import (
	"context"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"time"

	"github.com/pkg/sftp"
	gossh "golang.org/x/crypto/ssh"

	"github.com/gpuaas/gpuaas/hostd/term/ptyctl"
	"github.com/gpuaas/gpuaas/internal/sshlink"
	"github.com/gpuaas/gpuaas/internal/sshwire"
)

// localTarget serves a bare-metal allocation on the node itself, as the
// allocation's POSIX user.
type localTarget struct {
	s    *Server
	c    *conn
	acct Account
	ctx  context.Context
	sc   gossh.Conn // the client's connection
	rf   localForwards
}

// sessionPath is the PATH of session processes, the user's ~/.local/bin
// last (sessionPATH); a login shell sets its own from /etc/profile and
// ~/.profile, which on Debian adds ~/.local/bin too.
const sessionPath = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

// sessionPATH is the PATH of a session of the account with home home: a
// command run without a login shell (`ssh ID@gateway nvidia-smi`) finds
// what a login shell would, the tools in ~/.local/bin among them (the
// simulated nvidia-smi, a pip --user install).
func sessionPATH(home string) string { return sessionPath + ":" + home + "/.local/bin" }

// ptyDrain is how long a PTY session's output is still read after its
// process exited, for a background job that keeps the terminal open.
const ptyDrain = 2 * time.Second

func (t *localTarget) session(nc gossh.NewChannel) {
	ch, reqs, err := nc.Accept()
	if err != nil {
		return
	}
	l := &localSession{t: t, ch: ch, done: make(chan struct{})}
	l.serve(reqs)
}

// localSession is one session channel. Its fields are used by the request
// loop only; the goroutine that runs the program gets what it needs as
// arguments and reports through done.
type localSession struct {
	t       *localTarget
	ch      gossh.Channel
	env     []string
	pty     *sshwire.PtyRequestMsg
	started bool
	ptmx    *os.File             // the PTY's master side, once started with one
	agent   *sshwire.AgentSocket // ssh -A: the forwarded agent's socket
	pid     int                  // the program's process (and process group) id; 0 when in-process
	done    chan struct{}
}

func (l *localSession) serve(reqs <-chan *gossh.Request) {
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
	l.hangup()
	if l.agent != nil {
		_ = l.agent.Close()
	}
}

// handle answers one request; run, when not nil, is started after the
// reply and carries the program to its end.
func (l *localSession) handle(req *gossh.Request) (ok bool, run func()) {
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
		if l.ptmx != nil {
			_ = ptyctl.SetWinsize(l.ptmx, m.Columns, m.Rows, m.Width, m.Height)
		}
		return true, nil
	case "signal":
		var m sshwire.SignalMsg
		if gossh.Unmarshal(req.Payload, &m) != nil {
			return false, nil
		}
		sig, known := sshwire.Signal(m.Signal)
		if !known || l.pid == 0 {
			return false, nil
		}
		return l.signal(sig), nil
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

// start starts the session's program: the login shell, a command through
// the shell, or sftp.
func (l *localSession) start(req *gossh.Request) (func(), error) {
	a := l.t.acct
	switch req.Type {
	case "shell":
		return l.spawn(&exec.Cmd{Path: a.Shell, Args: []string{"-" + filepath.Base(a.Shell)}})
	case "exec":
		var m sshwire.ExecMsg
		if err := gossh.Unmarshal(req.Payload, &m); err != nil {
			return nil, err
		}
		return l.spawn(&exec.Cmd{Path: a.Shell, Args: []string{filepath.Base(a.Shell), "-c", m.Command}})
	default: // subsystem sftp, the only one sessionRequestAllowed lets through
		if a.Credential == nil {
			return l.sftpInProcess()
		}
		if l.t.s.cfg.SFTPServer == "" {
			return nil, ErrNoSFTPServer
		}
		l.pty = nil // sftp-server speaks binary: never through a terminal
		return l.spawn(&exec.Cmd{Path: l.t.s.cfg.SFTPServer, Args: []string{"sftp-server"}})
	}
}

// environ is the program's environment: the account's, then TERM from the
// PTY request, then the allowed variables the client sent (later entries
// win in os/exec), then the forwarded agent's socket.
func (l *localSession) environ() []string {
	a := l.t.acct
	env := []string{"HOME=" + a.Home, "USER=" + a.Name, "LOGNAME=" + a.Name, "SHELL=" + a.Shell, "PATH=" + sessionPATH(a.Home)}
	if l.pty != nil && l.pty.Term != "" {
		env = append(env, "TERM="+l.pty.Term)
	}
	env = append(env, l.env...)
	if l.agent != nil {
		env = append(env, sshwire.AgentSocketEnv+"="+l.agent.Path)
	}
	return env
}

// spawn starts cmd as the account, in its home (or / when that is
// missing, as sshd does), in a session of its own, with a PTY when one
// was requested, isolated as the account says (private /tmp, /var/tmp,
// /dev/shm and IPC namespace: host.Isolation).
func (l *localSession) spawn(cmd *exec.Cmd) (func(), error) {
	a := l.t.acct
	cmd.Env = l.environ()
	cmd.Dir = a.Home
	if fi, err := os.Stat(a.Home); err != nil || !fi.IsDir() {
		cmd.Dir = "/"
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Credential: a.Credential}
	if a.Isolation != nil {
		var agent string
		if l.agent != nil {
			agent = l.agent.Path
		}
		if err := a.Isolation.Isolate(cmd, a.Credential, agent); err != nil {
			return nil, err
		}
	}
	if l.pty != nil {
		return l.spawnPTY(cmd)
	}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	// os/exec copies the output pipes into the channel with io.Copy; the
	// channel's window holds the program back when the client reads slowly.
	cmd.Stdout, cmd.Stderr = l.ch, l.ch.Stderr()
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	l.pid = cmd.Process.Pid
	return func() {
		// Not waited for: the copy ends when the channel does (or at the
		// first write after the program closed its stdin).
		go func() {
			_, _ = io.Copy(stdin, l.ch)
			_ = stdin.Close()
		}()
		_ = cmd.Wait()
		l.exit(cmd.ProcessState)
	}, nil
}

func (l *localSession) spawnPTY(cmd *exec.Cmd) (func(), error) {
	ptmx, tty, err := ptyctl.Open()
	if err != nil {
		return nil, err
	}
	defer tty.Close()
	p := l.pty
	if err := applyModes(tty, p.Modes); err != nil {
		l.t.s.cfg.Log.Debug("terminal modes not applied", "err", err)
	}
	if err := ptyctl.SetWinsize(ptmx, p.Columns, p.Rows, p.Width, p.Height); err != nil {
		_ = ptmx.Close()
		return nil, err
	}
	if cred := l.t.acct.Credential; cred != nil {
		// As sshd does: the terminal belongs to the user (mesg, write and
		// programs that reopen /dev/tty need it).
		if err := chownTTY(tty, cred); err != nil {
			_ = ptmx.Close()
			return nil, err
		}
	}
	cmd.Stdin, cmd.Stdout, cmd.Stderr = tty, tty, tty
	cmd.SysProcAttr.Setctty = true
	cmd.SysProcAttr.Ctty = 0 // the child's stdin
	if err := cmd.Start(); err != nil {
		_ = ptmx.Close()
		return nil, err
	}
	l.ptmx, l.pid = ptmx, cmd.Process.Pid
	return func() {
		out := make(chan struct{})
		go func() {
			_, _ = copyPTY(l.ch, ptmx)
			close(out)
		}()
		go func() { _, _ = copyPTY(ptmx, l.ch) }()
		_ = cmd.Wait()
		select {
		case <-out: // the last holder of the terminal closed it
		case <-time.After(ptyDrain):
		}
		_ = ptmx.Close()
		<-out
		l.exit(cmd.ProcessState)
	}, nil
}

// copyPTY copies src to dst with sshwire.Copy: the copies each way between
// a PTY and its channel last the whole session, idle or not, and an idle
// one holds a small buffer, a full one only while data flows
// (sshgate's BenchmarkIdleSessions). It never uses an *os.File's ReadFrom
// or WriteTo, which would allocate their own 32 KiB.
func copyPTY(dst io.Writer, src io.Reader) (int64, error) {
	return sshwire.Copy(dst, src)
}

// sftpInProcess serves sftp from hostd itself, starting in the account's
// home: for accounts that run as hostd's own user (the sim), where a
// process of its own would give the user nothing more or less.
func (l *localSession) sftpInProcess() (func(), error) {
	srv, err := sftp.NewServer(l.ch, sftp.WithServerWorkingDirectory(l.t.acct.Home))
	if err != nil {
		return nil, err
	}
	return func() {
		code := 0
		if err := srv.Serve(); err != nil {
			code = 1
		}
		l.sendExit(sshwire.ExitStatusMsg{Status: uint32(code)}, nil)
	}, nil
}

// signal delivers sig to the program's process group; with a PTY, to the
// terminal's foreground process group (the job the user is running),
// which is what a key press would reach.
func (l *localSession) signal(sig syscall.Signal) bool {
	select {
	case <-l.done:
		return false
	default:
	}
	pgid := l.pid
	if l.ptmx != nil {
		if fg, err := ptyctl.ForegroundGroup(l.ptmx); err == nil && fg > 0 {
			pgid = fg
		}
	}
	return syscall.Kill(-pgid, sig) == nil
}

// hangup runs when the channel is gone: a program still running is hung
// up on, as by a closed terminal (background jobs that ignore SIGHUP live
// on, as with sshd).
func (l *localSession) hangup() {
	if l.pid == 0 {
		return
	}
	select {
	case <-l.done:
		return
	default:
	}
	_ = syscall.Kill(-l.pid, syscall.SIGHUP)
	if l.ptmx != nil {
		_ = l.ptmx.Close()
	}
}

// exit reports how the program ended and closes the channel.
func (l *localSession) exit(st *os.ProcessState) {
	if st == nil {
		l.sendExit(sshwire.ExitStatusMsg{Status: 255}, nil)
		return
	}
	ws, _ := st.Sys().(syscall.WaitStatus)
	if ws.Signaled() {
		if name := sshwire.SignalName(ws.Signal()); name != "" {
			l.sendExit(nil, &sshwire.ExitSignalMsg{Signal: name, CoreDumped: ws.CoreDump()})
			return
		}
		l.sendExit(sshwire.ExitStatusMsg{Status: 128 + uint32(ws.Signal())}, nil)
		return
	}
	l.sendExit(sshwire.ExitStatusMsg{Status: uint32(st.ExitCode())}, nil)
}

// sendExit sends EOF, the exit status (or signal), and closes the channel.
func (l *localSession) sendExit(status any, sig *sshwire.ExitSignalMsg) {
	close(l.done)
	_ = l.ch.CloseWrite()
	if sig != nil {
		_, _ = l.ch.SendRequest("exit-signal", false, gossh.Marshal(sig))
	} else {
		_, _ = l.ch.SendRequest("exit-status", false, gossh.Marshal(status))
	}
	_ = l.ch.Close()
}
