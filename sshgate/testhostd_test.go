package sshgate

import (
	"context"
	"errors"
	"io"
	"net"
	"os"
	"os/exec"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/creack/pty"
	glssh "github.com/gliderlabs/ssh"
	"github.com/pkg/sftp"
	gossh "golang.org/x/crypto/ssh"

	"github.com/gpuaas/gpuaas/internal/sshcert"
	"github.com/gpuaas/gpuaas/internal/sshwire"
)

// testHostd is a real SSH server standing in for hostd's terminal server
// (hostd/term) until the gateway is tested against it: gliderlabs/ssh,
// asking, as hostd does, first for a gateway certificate of the internal
// CA, then for a ticket of the internal CA for its node (replays refused),
// running commands with /bin/sh (under a real PTY when one is requested),
// with the sftp subsystem and direct-tcpip.
type testHostd struct {
	node    string
	intCA   []gossh.PublicKey
	hostKey gossh.Signer
	addr    string
	srv     *glssh.Server

	// produced counts the output bytes commands wrote (backpressure tests).
	produced atomic.Int64

	// mu protects the following.
	mu      sync.Mutex
	serials map[uint64]bool
	envs    [][]string // each session's environment as the client set it
	users   []string   // the SSH user of each connection
}

// startTestHostd serves on loopback. hostKey may be a certificate signer.
func startTestHostd(t testing.TB, node string, intCA []gossh.PublicKey, hostKey gossh.Signer) *testHostd {
	t.Helper()
	h := &testHostd{node: node, intCA: intCA, hostKey: hostKey, serials: map[uint64]bool{}}
	h.srv = &glssh.Server{
		Handler:          h.session,
		HostSigners:      []glssh.Signer{hostKey},
		PublicKeyHandler: h.gatewayKey,
		ServerConfigCallback: func(ctx glssh.Context) *gossh.ServerConfig {
			// The gateway certificate that signed, then only tickets.
			return &gossh.ServerConfig{VerifiedPublicKeyCallback: func(_ gossh.ConnMetadata, key gossh.PublicKey, perms *gossh.Permissions, _ string) (*gossh.Permissions, error) {
				if ctx.Value(gatewayStep{}) != nil {
					return perms, nil
				}
				if _, err := sshcert.VerifyGateway(h.intCA, key, time.Now()); err != nil {
					return nil, err
				}
				ctx.SetValue(gatewayStep{}, true)
				return nil, &gossh.PartialSuccessError{Next: gossh.ServerAuthCallbacks{
					PublicKeyCallback: func(_ gossh.ConnMetadata, key gossh.PublicKey) (*gossh.Permissions, error) {
						if !h.publicKey(ctx, key) {
							return nil, errors.New("not a ticket for this node")
						}
						return &gossh.Permissions{}, nil
					}}}
			}}
		},
		ChannelHandlers: map[string]glssh.ChannelHandler{
			"session":      glssh.DefaultSessionHandler,
			"direct-tcpip": directTCPIP,
		},
		SubsystemHandlers: map[string]glssh.SubsystemHandler{"sftp": h.sftp},
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	h.addr = ln.Addr().String()
	go func() { _ = h.srv.Serve(ln) }()
	t.Cleanup(func() { _ = h.srv.Close() })
	return h
}

type serialKey struct{}

// gatewayStep is set on a connection once it proved a gateway certificate.
type gatewayStep struct{}

func (h *testHostd) gatewayKey(_ glssh.Context, key glssh.PublicKey) bool {
	_, err := sshcert.VerifyGateway(h.intCA, key, time.Now())
	return err == nil
}

func (h *testHostd) publicKey(ctx glssh.Context, key glssh.PublicKey) bool {
	tk, err := sshcert.VerifyTicket(h.intCA, key, h.node, time.Now())
	if err != nil || ctx.User() != tk.PosixUser {
		return false
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	// Replay: x/crypto re-runs this callback for the signing key after a
	// query, so only a serial first seen on another connection is one.
	if prev, seen := h.serials[tk.Serial]; seen && !prev {
		return false
	}
	h.serials[tk.Serial] = false
	ctx.SetValue(serialKey{}, tk.Serial)
	return true
}

func (h *testHostd) noteConn(s glssh.Session) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if serial, ok := s.Context().Value(serialKey{}).(uint64); ok {
		h.serials[serial] = true // spent
	}
	h.envs = append(h.envs, s.Environ())
	h.users = append(h.users, s.User())
}

func (h *testHostd) lastEnv() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.envs) == 0 {
		return nil
	}
	return h.envs[len(h.envs)-1]
}

// countingWriter counts what commands write.
type countingWriter struct {
	w io.Writer
	n *atomic.Int64
}

func (c countingWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n.Add(int64(n))
	return n, err
}

func (h *testHostd) session(s glssh.Session) {
	h.noteConn(s)
	args := []string{"/bin/sh"}
	if s.RawCommand() != "" {
		args = append(args, "-c", s.RawCommand())
	}
	cmd := exec.Command(args[0], args[1:]...)
	cmd.Env = append([]string{"PATH=/usr/bin:/bin", "HOME=" + os.TempDir()}, s.Environ()...)
	ptyReq, winCh, isPty := s.Pty()

	var exitErr error
	if isPty {
		cmd.Env = append(cmd.Env, "TERM="+ptyReq.Term)
		f, err := pty.StartWithSize(cmd, &pty.Winsize{Cols: uint16(ptyReq.Window.Width), Rows: uint16(ptyReq.Window.Height)})
		if err != nil {
			_, _ = io.WriteString(s.Stderr(), err.Error())
			_ = s.Exit(1)
			return
		}
		var fmu sync.Mutex // guards f against Close during a resize
		go func() {
			for w := range winCh {
				fmu.Lock()
				_ = pty.Setsize(f, &pty.Winsize{Cols: uint16(w.Width), Rows: uint16(w.Height)})
				fmu.Unlock()
			}
			// winCh closes with the channel: hang up, as sshd does. (An
			// EOF from the client means nothing to a terminal; closing f
			// would not interrupt the blocking read of the master.)
			_ = cmd.Process.Signal(syscall.SIGHUP)
		}()
		stopSignals := h.relaySignals(s, cmd)
		go func() { _, _ = io.Copy(f, s) }()
		_, _ = io.Copy(countingWriter{s, &h.produced}, f) // until EIO: the shell is gone
		exitErr = cmd.Wait()
		stopSignals()
		fmu.Lock()
		_ = f.Close()
		fmu.Unlock()
	} else {
		stdin, _ := cmd.StdinPipe()
		cmd.Stdout = countingWriter{s, &h.produced}
		cmd.Stderr = s.Stderr()
		if err := cmd.Start(); err != nil {
			_, _ = io.WriteString(s.Stderr(), err.Error())
			_ = s.Exit(1)
			return
		}
		stopSignals := h.relaySignals(s, cmd)
		go func() {
			_, _ = io.Copy(stdin, s)
			_ = stdin.Close()
		}()
		exitErr = cmd.Wait()
		stopSignals()
	}
	var ee *exec.ExitError
	if errors.As(exitErr, &ee) {
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			_, _ = s.SendRequest("exit-signal", false, gossh.Marshal(sshwire.ExitSignalMsg{Signal: signalName(ws.Signal())}))
			_ = s.Close()
			return
		}
		_ = s.Exit(ee.ExitCode())
		return
	}
	_ = s.Exit(0)
}

func (h *testHostd) relaySignals(s glssh.Session, cmd *exec.Cmd) func() {
	sigs := make(chan glssh.Signal, 4)
	quit := make(chan struct{})
	s.Signals(sigs)
	go func() {
		for {
			select {
			case sig := <-sigs:
				if n, ok := sshwire.Signal(string(sig)); ok {
					_ = cmd.Process.Signal(n)
				}
			case <-quit:
				return
			}
		}
	}()
	return func() { s.Signals(nil); close(quit) }
}

// signalName is the SSH name of sig; "UNKNOWN" when SSH has none.
func signalName(sig syscall.Signal) string {
	if name := sshwire.SignalName(sig); name != "" {
		return name
	}
	return "UNKNOWN"
}

func (h *testHostd) sftp(s glssh.Session) {
	h.noteConn(s)
	srv, err := sftp.NewServer(s)
	if err != nil {
		_ = s.Exit(1)
		return
	}
	if err := srv.Serve(); err != nil && !errors.Is(err, io.EOF) {
		_ = s.Exit(1)
		return
	}
	_ = s.Exit(0)
}

// directTCPIP forwards to ports on loopback only, keeping half-closes
// (gliderlabs' own handler closes both ways at the first EOF).
func directTCPIP(_ *glssh.Server, _ *gossh.ServerConn, newChan gossh.NewChannel, ctx glssh.Context) {
	var d sshwire.DirectTCPIPMsg
	if err := gossh.Unmarshal(newChan.ExtraData(), &d); err != nil {
		_ = newChan.Reject(gossh.Prohibited, "destination not allowed")
		return
	}
	var dialer net.Dialer
	conn, err := sshwire.DialLoopback(ctx, d, func(ctx context.Context, addr string) (net.Conn, error) {
		return dialer.DialContext(ctx, "tcp", addr)
	})
	switch {
	case errors.Is(err, sshwire.ErrNotLoopback):
		_ = newChan.Reject(gossh.Prohibited, "destination not allowed")
		return
	case err != nil:
		_ = newChan.Reject(gossh.ConnectionFailed, err.Error())
		return
	}
	_, _ = sshwire.AcceptAndSplice(newChan, conn.(*net.TCPConn))
}
