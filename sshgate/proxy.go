package sshgate

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/charmbracelet/ssh"
	gossh "golang.org/x/crypto/ssh"

	"github.com/gpuaas/gpuaas/gateway/core"
	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/sshcert"
	"github.com/gpuaas/gpuaas/internal/sshlink"
	"github.com/gpuaas/gpuaas/internal/sshwire"
)

// proxySession serves one session of an allocation connection: it opens a
// session on the node's terminal server (over the connection's one link to
// the node) and relays the client's requests and both byte streams, then
// the node's exit status or signal. PTY sessions are recorded.
//
// Backpressure: every byte moves through sshwire.Copy (io.Copy's one read,
// then its write) between two SSH channels, each with its own flow-control
// window. When the client reads slowly, the copy blocks on the client's
// window, stops reading the node's channel, and the node's window closes:
// the gateway holds at most one copy buffer per direction, whatever the
// node writes. The recorder only appends to a local file.
func (g *Gateway) proxySession(s ssh.Session, id sshcert.Identity) {
	g.bg.add()
	defer g.bg.done()
	ctx := s.Context()
	alloc := s.User()
	pty, hasPty := g.ptyOf(s)
	kind, command := api.SessionShell, ""
	switch {
	case s.Subsystem() != "":
		kind, command = api.SessionSFTP, s.Subsystem()
	case s.RawCommand() != "":
		kind, command = api.SessionExec, s.RawCommand()
	}

	up, err := g.upstreamFor(ctx, id)
	if err != nil {
		g.log.Warn("allocation refused", "allocation", alloc, "user", id.UserID, "err", err)
		fail(s, publicError(err))
		return
	}
	alloc = up.Auth.AllocationID // a workload's (workload.go): activity, index
	// Notices go to shells and exec sessions, never into an sftp stream.
	var noticeTo core.Notifier // a nil interface for sftp, not a nil pointer
	if kind != api.SessionSFTP {
		noticeTo = &sessionNotifier{g: g, s: s, lc: loginOf(ctx)}
	}
	act := g.core.Track(alloc, noticeTo)
	defer act.Close()
	var sessionID string
	onOwnStack(func() { sessionID, err = g.startIndex(ctx, id, alloc, kind, command) })
	if err != nil {
		g.log.Error("session not indexed; refusing it", "allocation", alloc, "user", id.UserID, "err", err)
		fail(s, errors.New("cannot record this session right now; try again"))
		return
	}
	var rec *core.Recorder
	if hasPty {
		// In the spool under the session id when there is one: kept until
		// uploaded, recovered after a crash.
		rec, err = g.core.NewSessionRecorder(sessionID, pty.Term, pty.Window.Width, pty.Window.Height)
		if err != nil {
			// Every PTY session is recorded; one that cannot be is not served.
			g.log.Error("cannot record; refusing the session", "session", sessionID, "err", err)
			fail(s, errors.New("cannot record this session right now; try again"))
			g.finishSession(sessionID, nil, sessionResult{})
			return
		}
	}
	if hasPty && kind == api.SessionShell && up.Auth.Banner != "" {
		// The cost line (gate.authorize's Banner), for people only: never
		// into the output of exec, scp or sftp. A pty is in raw mode, hence
		// the carriage return.
		_, _ = io.WriteString(s.Stderr(), up.Auth.Banner+"\r\n")
	}
	res := g.relay(s, id, up, pty, hasPty, kind, rec, act.Flag())
	if rec != nil && rec.Err() != nil {
		g.log.Error("recording failed during the session", "session", sessionID, "err", rec.Err())
	}
	g.finishSession(sessionID, rec, res)
}

// relay runs the session on the node and returns how it ended. It works
// on the raw channel (not x/crypto's Session, which cannot wait for a
// subsystem) and mirrors what the client asked, in order: env, pty-req,
// then shell, exec or subsystem.
// touched is set whenever channel data moves (activity.go).
func (g *Gateway) relay(s ssh.Session, id sshcert.Identity, up *upstream, pty ssh.Pty, hasPty bool, kind string, rec *core.Recorder, touched *atomic.Bool) sessionResult {
	var res sessionResult
	node, nodeReqs, err := up.Conn.OpenChannel("session", nil)
	if err != nil {
		g.log.Warn("open session on node", "node", up.Auth.NodeID, "err", err)
		fail(s, errors.New("the node did not open a session"))
		return res
	}
	defer node.Close()

	// Only the allow-list leaves the gateway; what else the client sent
	// (SendEnv, SetEnv) is logged by name, never by value, and the client
	// is not told, as with OpenSSH's AcceptEnv.
	env, dropped := forwardedEnv(s.Environ(), hasPty)
	if len(dropped) > 0 {
		g.log.Info("client environment not passed on", "allocation", up.Auth.AllocationID, "node", up.Auth.NodeID,
			"names", dropped, "allowed", EnvAllowList)
	}
	for _, kv := range env {
		if ok, err := node.SendRequest("env", true, gossh.Marshal(sshwire.EnvMsg{Name: kv[0], Value: kv[1]})); err == nil && !ok {
			g.log.Info("node refused an environment variable", "allocation", up.Auth.AllocationID, "node", up.Auth.NodeID, "name", kv[0])
		}
	}
	if ssh.AgentRequested(s) {
		g.forwardAgent(s, id, up, node)
	}
	if hasPty {
		if ok, err := node.SendRequest("pty-req", true, ptyRequest(pty)); err != nil || !ok {
			fail(s, errors.New("the node refused a terminal"))
			return res
		}
	}
	var start []byte
	switch kind {
	case api.SessionExec:
		start = gossh.Marshal(sshwire.ExecMsg{Command: s.RawCommand()})
	case api.SessionSFTP:
		start = gossh.Marshal(sshwire.SubsystemMsg{Name: s.Subsystem()})
	}
	if ok, err := node.SendRequest(startRequest[kind], true, start); err != nil || !ok {
		fail(s, fmt.Errorf("the node refused the %s request", kind))
		return res
	}

	var in, out atomic.Int64
	var stdout io.Writer = s
	if rec != nil {
		// The client first: the recording holds what the client was sent.
		stdout = io.MultiWriter(s, rec)
	}
	closeNode := sync.OnceFunc(func() { _ = node.Close() })
	done := make(chan struct{})
	// The client's input, then its EOF, to the node.
	go sshwire.CopyHalf(node, &countingReader{r: s, n: &in, touched: touched})
	// The client's whole connection went away (without a goroutine
	// waiting for it: BenchmarkIdleSessions).
	stopWatching := context.AfterFunc(s.Context(), closeNode)
	ev := sessionEvents{node: node, nodeReqs: nodeReqs, exit: make(chan exitInfo, 1), sigs: make(chan ssh.Signal, 8),
		rec: rec, done: done, connDone: s.Context().Done(), closeNode: closeNode}
	if hasPty {
		_, ev.winCh, _ = s.Pty()
	}
	s.Signals(ev.sigs) // never unregistered: see sessionEvents
	go ev.relay()

	// sshwire.Copy: an idle session holds a small buffer each way, and a
	// full one only while output flows (BenchmarkIdleSessions). stdout is
	// copied by this goroutine itself; stderr by one started when it is
	// first used (stderrRelay).
	stderr := startStderrRelay(node, &clientWriter{w: s.Stderr(), n: &out, touched: touched, gone: closeNode})
	_, _ = sshwire.Copy(&clientWriter{w: stdout, n: &out, touched: touched, gone: closeNode}, node)
	stderr.wait()
	ex := <-ev.exit // the node closed the channel: nothing more will come
	close(done)
	stopWatching()
	res.bytes = in.Load() + out.Load()
	if lc := loginOf(s.Context()); lc != nil {
		lc.endWrite(s, func() { _ = s.CloseWrite() })
	} else {
		_ = s.CloseWrite()
	}

	switch {
	case ex.signal != nil:
		code := 128 + sshwire.LinuxSignalNumber(ex.signal.Signal)
		res.exit = &code
		_, _ = s.SendRequest("exit-signal", false, gossh.Marshal(ex.signal))
		_ = s.Close()
	case ex.status != nil:
		res.exit = ex.status
		_ = s.Exit(*ex.status)
	default:
		// No exit status from the node (its link dropped, or the client
		// went away and the gateway closed the node's channel): close
		// without one, as sshd would.
		g.log.Info("session ended without exit status", "node", up.Auth.NodeID)
		_ = s.Close()
	}
	return res
}

// forwardAgent asks the node for the client's agent (ssh -A), when the
// certificate permits it; the client is told when it does not.
func (g *Gateway) forwardAgent(s ssh.Session, id sshcert.Identity, up *upstream, node gossh.Channel) {
	if !permits(id, sshcert.ExtensionPermitAgentForwarding) {
		g.log.Info("agent forwarding refused", "allocation", up.Auth.AllocationID, "err", ErrNotPermitted)
		_, _ = fmt.Fprintf(s.Stderr(), "gpuaas gateway: agent forwarding refused: %v (run `gpuaas login` for a new certificate)\r\n", ErrNotPermitted)
		return
	}
	// Allowed before it is asked for: the node may open the first
	// channel as soon as it has answered.
	up.agent.Store(true)
	if ok, err := node.SendRequest(sshwire.AgentRequest, true, nil); err != nil || !ok {
		g.log.Info("node refused agent forwarding", "allocation", up.Auth.AllocationID, "node", up.Auth.NodeID, "err", err)
	}
}

// exitInfo is what the node said about how the session ended.
type exitInfo struct {
	status *int
	signal *sshwire.ExitSignalMsg
}

// take keeps the exit status or signal of one of the node's requests.
func (ex *exitInfo) take(req *gossh.Request) {
	switch req.Type {
	case "exit-status":
		if st, ok := sshwire.ExitStatus(req.Payload); ok {
			code := int(st)
			ex.status = &code
		}
	case "exit-signal":
		var sig sshwire.ExitSignalMsg
		if gossh.Unmarshal(req.Payload, &sig) == nil {
			ex.signal = &sig
		}
	}
}

// startRequest is the request that starts a session of each kind.
var startRequest = map[string]string{api.SessionShell: "shell", api.SessionExec: "exec", api.SessionSFTP: "subsystem"}

// sessionEvents is what a session relays besides its byte streams, all
// served by one goroutine (relay), not one each (BenchmarkIdleSessions):
//
//   - the node's requests on the session channel, until it closes, keeping
//     the exit status or signal, then sent on exit;
//   - the client's window changes, to the node and the recording until the
//     session is done, then drained: the library's request loop blocks on
//     winCh, which closes only when the client's channel does (which also
//     ends the node's session);
//   - the client's signals, to the node until the session is done, then
//     drained until the connection's end. The channel is never
//     unregistered: gliderlabs/ssh replays signals that came before
//     registration from a goroutine that reads the channel field without
//     its lock, so Signals(nil) races it, and an unread channel would
//     block the session's request loop.
type sessionEvents struct {
	node      gossh.Channel
	nodeReqs  <-chan *gossh.Request
	exit      chan exitInfo
	winCh     <-chan ssh.Window // nil without a PTY
	sigs      chan ssh.Signal
	rec       *core.Recorder
	done      <-chan struct{} // the session is done
	connDone  <-chan struct{} // the client's connection ended
	closeNode func()
}

func (e *sessionEvents) relay() {
	var ex exitInfo
	nodeReqs, winCh, connDone := e.nodeReqs, e.winCh, e.connDone
	first := true
	for nodeReqs != nil || winCh != nil || connDone != nil {
		select {
		case req, ok := <-nodeReqs:
			if !ok {
				e.exit <- ex
				nodeReqs = nil
				continue
			}
			ex.take(req)
			if req.WantReply {
				_ = sshlink.Reply(req, false, nil)
			}
		case w, ok := <-winCh:
			switch {
			case !ok:
				winCh = nil
				e.closeNode()
			case first:
				// The size of the pty-req itself, which the library queues.
				first = false
			case !closed(e.done):
				_, _ = e.node.SendRequest("window-change", false, gossh.Marshal(sshwire.WindowChangeMsg{
					Columns: uint32(w.Width), Rows: uint32(w.Height), Width: uint32(w.WidthPixels), Height: uint32(w.HeightPixels)}))
				if e.rec != nil {
					e.rec.Resize(w.Width, w.Height)
				}
			}
		case sig := <-e.sigs:
			if !closed(e.done) {
				_, _ = e.node.SendRequest("signal", false, gossh.Marshal(sshwire.SignalMsg{Signal: string(sig)}))
			}
		case <-connDone:
			connDone = nil
		}
	}
}

// closed reports whether c is closed.
func closed(c <-chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}

// clientWriter writes what the node sends to the client, counts it, and
// closes the node's session when the client can no longer be written to
// (its channel closed), so a node still producing output is not left
// blocked on a window nobody will open.
type clientWriter struct {
	w       io.Writer
	n       *atomic.Int64
	touched *atomic.Bool // the allocation's activity flag
	gone    func()
}

func (c *clientWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n.Add(int64(n))
	if n > 0 {
		core.Touch(c.touched)
	}
	if err != nil {
		c.gone()
	}
	return n, err
}

// countingReader counts what the client sends.
type countingReader struct {
	r       io.Reader
	n       *atomic.Int64
	touched *atomic.Bool // the allocation's activity flag
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n.Add(int64(n))
	if n > 0 {
		core.Touch(c.touched)
	}
	return n, err
}

// EnvAllowList names the client variables (SendEnv, SetEnv) an
// allocation session receives, as OpenSSH's AcceptEnv would. The node
// applies the same list (hostd/term).
const EnvAllowList = "TERM, LANG, LC_*"

// maxDroppedLogged caps the names of dropped variables logged per session.
const maxDroppedLogged = 32

// forwardedEnv is the client's environment the node is offered: the
// locale and, without a PTY, TERM (a PTY carries TERM in its request).
// Nothing else leaves the gateway: in particular not GPUAAS_TOKEN, which
// only command mode reads. dropped names the rest, each once, for the log.
func forwardedEnv(environ []string, hasPty bool) (out [][2]string, dropped []string) {
	for _, kv := range environ {
		k, v, ok := strings.Cut(kv, "=")
		switch {
		case !ok:
		case k == "LANG" || strings.HasPrefix(k, "LC_") || k == "TERM" && !hasPty:
			out = append(out, [2]string{k, v})
		case k == "TERM": // carried by the pty-req
		case len(dropped) < maxDroppedLogged && !slices.Contains(dropped, k):
			dropped = append(dropped, truncate(k, 64))
		}
	}
	return out, dropped
}

// ptyRequest encodes the client's pty-req for the node, terminal modes and
// pixel sizes included.
func ptyRequest(p ssh.Pty) []byte {
	return gossh.Marshal(sshwire.PtyRequestMsg{
		Term: p.Term, Columns: uint32(p.Window.Width), Rows: uint32(p.Window.Height),
		Width: uint32(p.Window.WidthPixels), Height: uint32(p.Window.HeightPixels), Modes: sshwire.EncodeModes(p.Modes),
	})
}

// onOwnStack runs f on a goroutine of its own and waits for it. For the
// deep calls a session makes once before it relays (the SSH handshake
// with the node, controld's requests): the stack they grow goes with that
// goroutine, rather than staying with the session's, which lives as long
// as the session (BenchmarkIdleSessions). A panic in f is raised again
// here, for the session's recoverMiddleware.
func onOwnStack(f func()) {
	done := make(chan struct{})
	var p any
	go func() {
		defer func() {
			p = recover()
			close(done)
		}()
		f()
	}()
	<-done
	if p != nil {
		panic(p)
	}
}
