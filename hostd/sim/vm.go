package sim

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/gliderlabs/ssh"
	"github.com/pkg/sftp"
	"go.yaml.in/yaml/v3"
	gossh "golang.org/x/crypto/ssh"

	"github.com/gpuaas/gpuaas/hostd/env/ptyctl"
	"github.com/gpuaas/gpuaas/hostd/host"
	"github.com/gpuaas/gpuaas/hostd/term"
	"github.com/gpuaas/gpuaas/internal/fsutil"
	"github.com/gpuaas/gpuaas/internal/sshwire"
)

// vm is a running sim guest: an SSH server on 127.0.0.1 that lets in the
// users of the domain's cloud-init seed with their keys and, like a VM's
// sshd, runs their commands with bash (sh without it) in their home (with a
// PTY when asked, resized on window-change), serves the sftp subsystem
// (in-process, starting in the home) and direct-tcpip to the guest's
// "loopback" (which is the host's: 127.0.0.0/8, ::1 and localhost only).
// A session without a command gets the shell: interactive with a PTY,
// reading its stdin without one. The guest's nvidia-smi (smiscript.go) is
// on its PATH. As with any gliderlabs/ssh server, PTY output
// has its line ends normalised to \r\n.
//
// With system users (guests not nil) each seed user is a POSIX account
// while the guest runs, and its commands and sftp (the system's
// sftp-server) run as that account in its home, as in a real VM: they
// cannot read hostd's state. (A real VM's user also has sudo in the VM;
// a sim guest's user has no way to root.)
type vm struct {
	srv   *ssh.Server
	ln    net.Listener
	addr  string
	done  chan struct{}
	users []string // the seed's users, sorted
	// sandbox holds the homes of sandbox users (no system users).
	sandbox string
}

// guestAccount is who a guest user's commands run as: hostd itself (cred
// nil) in a sandbox home, or a system user.
type guestAccount struct {
	home string
	cred *syscall.Credential
	path string // PATH of its commands
}

// guestPath is the PATH of commands run in a sim guest.
const guestPath = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

// guestSMI is how a guest answers nvidia-smi: its output and exit status;
// ok false when it has none (sh then runs the command).
type guestSMI func(ctx context.Context, args []string) (out []byte, code int, ok bool)

// guestShell is the shell of a sim guest's users, as on the bare-metal
// sim (a real VM image's users get bash): bash when the machine has it.
var guestShell = sync.OnceValue(func() string {
	if _, err := os.Stat("/bin/bash"); err == nil {
		return "/bin/bash"
	}
	return "/bin/sh"
})

// startVM starts the guest of spec; bin, when set, holds the guest's
// tools (its nvidia-smi) and comes first on its sessions' PATH.
func startVM(spec host.DomainSpec, hostKey gossh.Signer, sandbox string, guests *Users, smi guestSMI, bin string) (*vm, error) {
	var users map[string][]gossh.PublicKey
	if spec.SeedISO != "" {
		var err error
		if users, err = seedUsers(filepath.Join(filepath.Dir(spec.SeedISO), "user-data")); err != nil {
			return nil, err
		}
	}
	names := slices.Sorted(maps.Keys(users))
	path := guestPath
	if bin != "" {
		path = bin + ":" + guestPath
	}
	account := func(_ context.Context, user string) (guestAccount, error) {
		return guestAccount{home: filepath.Join(sandbox, user), path: path}, nil
	}
	if guests != nil {
		for _, name := range names {
			if err := guests.ensureGuest(context.Background(), name, users[name]); err != nil {
				return nil, err
			}
		}
		account = func(ctx context.Context, user string) (guestAccount, error) {
			a, err := guests.Accounts().Lookup(ctx, user)
			if err != nil {
				return guestAccount{}, err
			}
			return guestAccount{home: a.Home, cred: a.Credential, path: path}, nil
		}
	} else if err := os.MkdirAll(sandbox, 0o700); err != nil {
		return nil, err
	}
	srv := &ssh.Server{
		Version:     "OpenSSH_9.6p1 gpuaas-sim",
		HostSigners: []ssh.Signer{hostKey},
		PublicKeyHandler: func(ctx ssh.Context, key ssh.PublicKey) bool {
			for _, k := range users[ctx.User()] {
				if ssh.KeysEqual(k, key) {
					return true
				}
			}
			return false
		},
		Handler: func(s ssh.Session) {
			if a, ok := sessionAccount(s, account); ok && !answerNvidiaSMI(s, smi) {
				serveSession(s, a)
			}
		},
		SubsystemHandlers: map[string]ssh.SubsystemHandler{
			"sftp": func(s ssh.Session) {
				if a, ok := sessionAccount(s, account); ok {
					serveSFTP(s, a)
				}
			},
		},
		ChannelHandlers: map[string]ssh.ChannelHandler{
			"session":      ssh.DefaultSessionHandler,
			"direct-tcpip": directTCPIP,
		},
	}
	fwds := newGuestForwards()
	srv.RequestHandlers = map[string]ssh.RequestHandler{
		sshwire.ForwardRequest:       fwds.handle,
		sshwire.CancelForwardRequest: fwds.handle,
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	v := &vm{srv: srv, ln: ln, addr: ln.Addr().String(), done: make(chan struct{}), users: names, sandbox: sandbox}
	go func() {
		defer close(v.done)
		_ = srv.Serve(ln)
	}()
	return v, nil
}

// stop closes the listener and every connection; the sessions' commands
// are killed as their contexts end. The listener is closed here too: the
// server only closes listeners Serve has registered, and Serve may not
// have begun yet.
func (v *vm) stop() {
	_ = v.ln.Close()
	_ = v.srv.Close()
	<-v.done
}

// sessionAccount finds whom the session runs as; a user without one gets
// an error and exit status 1.
func sessionAccount(s ssh.Session, account func(context.Context, string) (guestAccount, error)) (guestAccount, bool) {
	a, err := account(s.Context(), s.User())
	if err != nil {
		fmt.Fprintf(s.Stderr(), "sim guest: %v\n", err)
		_ = s.Exit(1)
		return guestAccount{}, false
	}
	return a, true
}

// answerNvidiaSMI answers a session whose command is nvidia-smi (without
// a PTY) for the guest's passed-through GPUs, as the guest's driver would;
// false when the session is anything else.
func answerNvidiaSMI(s ssh.Session, smi guestSMI) bool {
	fields := strings.Fields(s.RawCommand())
	if _, _, isPty := s.Pty(); smi == nil || isPty || len(fields) == 0 || fields[0] != "nvidia-smi" {
		return false
	}
	out, code, ok := smi(s.Context(), fields[1:])
	if !ok {
		return false
	}
	_, _ = s.Write(out)
	_ = s.Exit(code)
	return true
}

// serveSession runs the session's command (or the shell) as a, in its
// home, with a PTY when one was requested, and reports its exit status.
// An interactive shell is not a login shell: a login shell's /etc/profile
// would set PATH again, without the guest's tools.
func serveSession(s ssh.Session, a guestAccount) {
	args := []string{guestShell()}
	if raw := s.RawCommand(); raw != "" {
		args = append(args, "-c", raw)
	}
	ptyReq, winch, isPty := s.Pty()
	runAs(s, a, args, isPty, ptyReq, winch)
}

// runAs runs args as a in its home (made first for a sandbox user), with a
// PTY when isPty, and reports the exit status.
func runAs(s ssh.Session, a guestAccount, args []string, isPty bool, ptyReq ssh.Pty, winch <-chan ssh.Window) {
	home := a.home
	if a.cred == nil {
		if err := os.MkdirAll(home, 0o700); err != nil {
			fmt.Fprintf(s.Stderr(), "sim guest: %v\n", err)
			_ = s.Exit(1)
			return
		}
	}
	cmd := exec.CommandContext(s.Context(), args[0], args[1:]...)
	cmd.Dir = home
	cmd.Env = s.Environ()
	if isPty && ptyReq.Term != "" {
		cmd.Env = append(cmd.Env, "TERM="+ptyReq.Term)
	}
	path := a.path
	if path == "" {
		path = guestPath
	}
	cmd.Env = append(cmd.Env, "HOME="+home, "USER="+s.User(), "LOGNAME="+s.User(), "SHELL="+guestShell(), "PATH="+path)
	if ssh.AgentRequested(s) && args[0] == guestShell() {
		// ssh -A: a socket of the user's, as a VM's sshd makes it.
		agent, err := listenAgent(s, a.cred)
		if err != nil {
			fmt.Fprintf(s.Stderr(), "sim guest: agent forwarding: %v\n", err)
		} else {
			defer agent.Close()
			cmd.Env = append(cmd.Env, sshwire.AgentSocketEnv+"="+agent.Path)
		}
	}
	// A session of its own, so the whole command goes when the session
	// does; WaitDelay stops a background child that keeps the output open
	// from holding the session.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Credential: a.cred}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 2 * time.Second
	if isPty {
		runWithPTY(s, cmd, ptyReq.Window, winch)
		return
	}
	cmd.Stdout, cmd.Stderr = s, s.Stderr()
	stdin, err := cmd.StdinPipe()
	if err == nil {
		err = cmd.Start()
	}
	if err != nil {
		fmt.Fprintf(s.Stderr(), "sim guest: %v\n", err)
		_ = s.Exit(127)
		return
	}
	// Not waited for: the client may keep its stdin open after the
	// command ends; the copy stops when the session closes.
	go func() {
		_, _ = io.Copy(stdin, s)
		_ = stdin.Close()
	}()
	stopSignals := forwardSignals(s, func() int { return cmd.Process.Pid })
	err = cmd.Wait()
	stopSignals()
	_ = s.Exit(exitCode(cmd, err))
}

// runWithPTY runs cmd on a new PTY of size win, resized from winch.
func runWithPTY(s ssh.Session, cmd *exec.Cmd, win ssh.Window, winch <-chan ssh.Window) {
	ptmx, tty, err := ptyctl.Open()
	if err != nil {
		fmt.Fprintf(s.Stderr(), "sim guest: %v\n", err)
		_ = s.Exit(1)
		return
	}
	defer ptmx.Close()
	cmd.Stdin, cmd.Stdout, cmd.Stderr = tty, tty, tty
	cmd.SysProcAttr.Setctty = true
	err = setWinsize(ptmx, win)
	if cred := cmd.SysProcAttr.Credential; err == nil && cred != nil {
		// The terminal is the user's, as sshd makes it.
		err = tty.Chown(int(cred.Uid), int(cred.Gid))
	}
	if err == nil {
		err = cmd.Start()
	}
	_ = tty.Close()
	if err != nil {
		fmt.Fprintf(s.Stderr(), "sim guest: %v\n", err)
		_ = s.Exit(127)
		return
	}
	// winch is closed when the session's requests end.
	go func() {
		for w := range winch {
			_ = setWinsize(ptmx, w)
		}
	}()
	out := make(chan struct{})
	go func() {
		_, _ = io.Copy(s, ptmx)
		close(out)
	}()
	go func() { _, _ = io.Copy(ptmx, s) }()
	// Signals go to the terminal's foreground job, as a key press would.
	stopSignals := forwardSignals(s, func() int {
		if pg, err := ptyctl.ForegroundGroup(ptmx); err == nil && pg > 0 {
			return pg
		}
		return cmd.Process.Pid
	})
	err = cmd.Wait()
	stopSignals()
	select {
	case <-out: // the last holder of the terminal closed it
	case <-time.After(2 * time.Second):
	}
	_ = ptmx.Close()
	<-out
	_ = s.Exit(exitCode(cmd, err))
}

// forwardSignals sends the session's signals to the process group group()
// names until stop is called.
func forwardSignals(s ssh.Session, group func() int) (stop func()) {
	return sshwire.WatchSignals(s.Signals, s.Context().Done(), func(name string) {
		if n, ok := sshwire.Signal(name); ok {
			_ = syscall.Kill(-group(), n)
		}
	})
}

func exitCode(cmd *exec.Cmd, err error) int {
	switch {
	case cmd.ProcessState != nil && cmd.ProcessState.ExitCode() >= 0:
		return cmd.ProcessState.ExitCode()
	case err != nil:
		return 255 // killed by a signal
	}
	return 0
}

// serveSFTP serves the sftp subsystem: for a system user, the system's
// sftp-server run as the user (as sshd does); for a sandbox user, pkg/sftp
// in-process, starting in its home.
func serveSFTP(s ssh.Session, a guestAccount) {
	if a.cred != nil {
		if p := term.FindSFTPServer(); p != "" {
			runAs(s, a, []string{p}, false, ssh.Pty{}, nil)
			return
		}
		fmt.Fprintln(s.Stderr(), "sim guest: no sftp-server installed")
		_ = s.Exit(1)
		return
	}
	home := a.home
	if err := os.MkdirAll(home, 0o700); err != nil {
		_ = s.Exit(1)
		return
	}
	srv, err := sftp.NewServer(s, sftp.WithServerWorkingDirectory(home))
	if err == nil {
		err = srv.Serve()
	}
	code := 0
	if err != nil {
		code = 1
	}
	_ = s.Exit(code)
}

// directTCPIP forwards to the guest's loopback only (sshwire's loopback
// policy): a sim guest's loopback is the host's, and a VM's user reaches
// nothing else through its sshd here. Each direction's EOF is passed on.
func directTCPIP(_ *ssh.Server, _ *gossh.ServerConn, nc gossh.NewChannel, ctx ssh.Context) {
	var d sshwire.DirectTCPIPMsg
	if err := gossh.Unmarshal(nc.ExtraData(), &d); err != nil {
		_ = nc.Reject(gossh.ConnectionFailed, "malformed direct-tcpip request")
		return
	}
	var dialer net.Dialer
	c, err := sshwire.DialLoopback(ctx, d, func(ctx context.Context, addr string) (net.Conn, error) {
		return dialer.DialContext(ctx, "tcp", addr)
	})
	switch {
	case errors.Is(err, sshwire.ErrNotLoopback):
		_ = nc.Reject(gossh.Prohibited, "only the guest's loopback can be reached")
		return
	case err != nil:
		_ = nc.Reject(gossh.ConnectionFailed, err.Error())
		return
	}
	_, _ = sshwire.AcceptAndSplice(nc, c.(*net.TCPConn))
}

// setWinsize sets the PTY's size to w's (gliderlabs/ssh keeps no pixel
// sizes).
func setWinsize(ptmx *os.File, w ssh.Window) error {
	return ptyctl.SetWinsize(ptmx, uint32(max(w.Width, 0)), uint32(max(w.Height, 0)), 0, 0)
}

// seedUsers reads the users and their authorized keys from a cloud-config
// user-data file, as cloud-init would create them. A file that is not
// cloud-config creates no users.
func seedUsers(userData string) (map[string][]gossh.PublicKey, error) {
	b, err := os.ReadFile(userData)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil // a guest nobody can log in to
	}
	if err != nil {
		return nil, err
	}
	if !bytes.HasPrefix(b, []byte("#cloud-config\n")) {
		return nil, nil
	}
	var cfg struct {
		Users []yaml.Node `yaml:"users"`
	}
	if err := yaml.Unmarshal(b, &cfg); err != nil {
		return nil, fmt.Errorf("user-data: %w", err)
	}
	out := map[string][]gossh.PublicKey{}
	for _, n := range cfg.Users {
		if n.Kind != yaml.MappingNode { // "default": the image's own user
			continue
		}
		var u struct {
			Name string   `yaml:"name"`
			Keys []string `yaml:"ssh_authorized_keys"`
		}
		if err := n.Decode(&u); err != nil {
			return nil, fmt.Errorf("user-data: %w", err)
		}
		for _, k := range u.Keys {
			pk, _, _, _, err := gossh.ParseAuthorizedKey([]byte(k))
			if err != nil {
				continue // cloud-init skips keys sshd would not read
			}
			out[u.Name] = append(out[u.Name], pk)
		}
		if _, ok := out[u.Name]; !ok {
			out[u.Name] = nil
		}
	}
	return out, nil
}

// loadOrMakeHostKey reads a guest's ed25519 host key, making it on first
// boot, so the guest keeps its identity across hostd restarts.
func loadOrMakeHostKey(path string) (gossh.Signer, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		_, priv, err := ed25519.GenerateKey(rand.Reader)
		if err != nil {
			return nil, err
		}
		block, err := gossh.MarshalPrivateKey(priv, "sim guest host key")
		if err != nil {
			return nil, err
		}
		b = pem.EncodeToMemory(block)
		if err := fsutil.WriteFile(path, b, 0o600, fsutil.Synced); err != nil {
			return nil, fmt.Errorf("host key: %w", err)
		}
	} else if err != nil {
		return nil, fmt.Errorf("host key: %w", err)
	}
	s, err := gossh.ParsePrivateKey(b)
	if err != nil {
		return nil, fmt.Errorf("host key %s: %w", path, err)
	}
	return s, nil
}
