// Package term is hostd's terminal endpoint: the SSH server sshgate dials
// with a one-minute ticket certificate from controld's internal CA. The
// same port serves links (internal/sshlink: SSH's connection layer over
// one TLS connection, sshgate's default, see link.go), authenticated with
// the same two steps and served the same way.
//
// A connection is let in only after two public-key steps: first a gateway
// certificate (sshcert.VerifyGateway, from a trusted internal CA key:
// the connection comes from sshgate, not from whoever holds a ticket),
// then a ticket for this node, signed by a trusted ticket CA key, whose
// SSH user is the ticket's POSIX user, and whose serial has not been used
// before; each identity is bound to the key that authenticated (sshcert's
// CVE-2024-45337 guard). See auth.go. It is then served for that
// allocation only:
//
//   - bare metal (the node's shape is baremetal): processes run as the
//     POSIX user (a login shell with a PTY, exec with or without a PTY, the
//     sftp subsystem), and direct-tcpip reaches loopback ports of the node;
//   - slice (the node's shape is gpu_slice): hostd opens an SSH connection
//     into the allocation's VM with the per-VM key and relays each channel
//     and request to it.
//
// Only session and direct-tcpip channels are accepted; in a session only
// pty-req, env (TERM, LANG, LC_*), auth-agent-req@openssh.com, shell,
// exec, subsystem sftp, window-change and signal; of global requests only
// tcpip-forward and cancel-tcpip-forward. Everything else is refused.
// Data moves with io.Copy between flow-controlled SSH channels, pipes and
// PTYs: nothing is buffered beyond one copy buffer and the SSH windows.
//
// The rules, in one place:
//
//   - Which way an allocation is served: by its environment (hostd/env),
//     which env.Factory.Open picks from the node's shape (SetNode); a
//     node whose shape is not known treats an allocation with a VM key
//     (env.VMKeyPath) as a slice, any other as bare metal. The terminal
//     never reads the shape itself: an environment that is an SSH server
//     (env.Hopper, the VM) is relayed channel by channel, any other runs
//     the session's processes (Environment.Exec) and dials its loopback.
//   - Whom a ticket may name: an allocation id tasks accept (it names
//     files) and exactly its POSIX user, api.PosixUser(allocation), which
//     must also be the SSH user. Accounts with uid 0 are never served.
//   - Replay: a ticket's serial is spent when its key proves possession,
//     and refused until the ticket expires (in memory: a restarted hostd
//     forgets, and tickets live a minute).
//   - Extensions: a PTY needs permit-pty, direct-tcpip and tcpip-forward
//     need permit-port-forwarding, the agent request
//     permit-agent-forwarding, all read from the certificate that
//     authenticated.
//   - Agent forwarding (ssh -A), on the client's request only: on bare
//     metal each session gets a socket of the account's (0600, in a 0700
//     directory of its own), named by SSH_AUTH_SOCK and removed with the
//     session; its connections are opened towards the client. In a slice
//     the VM's sshd does the same; its agent channels are relayed once a
//     session's request was granted.
//   - Remote forwarding (ssh -R): bare metal listens on the node's
//     loopback only (sshwire.ForwardListenAddrs: 127.0.0.1 and ::1, ports
//     from 1024), closed with the connection. In a slice the request goes
//     to the VM's sshd, and only forwarded-tcpip channels for forwards it
//     granted are relayed.
//   - Bare-metal processes run as the account (uid, gid, supplementary
//     groups), in a session of their own, in its home (/ when missing),
//     with HOME, USER, LOGNAME, SHELL, PATH, TERM and the allowed client
//     variables; the shell is the account's login shell ("-bash") or, for
//     exec, "$SHELL -c". No PAM session is opened (no pam_limits, no
//     logind scope). Signals go to the process group, with a PTY to the
//     terminal's foreground job. A closed channel hangs up (SIGHUP).
//   - sftp: a real account gets the system's sftp-server run as itself
//     (refused when none is installed); an account run as hostd's own user
//     (the sim) is served in-process by pkg/sftp, starting in its home.
//     scp is a command like any other (scp -t/-f), or sftp.
//   - direct-tcpip on bare metal reaches only the node's loopback
//     (localhost, 127.0.0.0/8, ::1): the user can reach the rest of the
//     network from their shell anyway, but hostd is not to dial other
//     hosts on their behalf. In a slice the request is made by the VM's
//     sshd, which applies its own policy.
//   - The VM hop authenticates with the per-VM key as the POSIX user and
//     pins the VM's host key on first use (see vmHostKeyCallback).
//   - A ticket whose allocation is a volume id ("vol-…") opens that volume
//     with sftp alone, chrooted as a fresh unprivileged uid (volume.go).
package term

import (
	"crypto/ed25519"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"github.com/gliderlabs/ssh"
	gossh "golang.org/x/crypto/ssh"

	"github.com/gpuaas/gpuaas/hostd/env"
	"github.com/gpuaas/gpuaas/hostd/host"
	"github.com/gpuaas/gpuaas/hostd/volume"
	"github.com/gpuaas/gpuaas/internal/sshlink"
	"github.com/gpuaas/gpuaas/internal/sshwire"
)

// Config configures a terminal Server.
type Config struct {
	// StateDir is hostd's state directory. The VM keys are read from it
	// (env.VMKeyPath); the terminal keeps its own host key and the VMs'
	// pinned host keys in StateDir/terminal. Required.
	StateDir string
	// Accounts finds the POSIX users of bare-metal allocations. Required.
	Accounts Accounts
	// Hypervisor locates slice VMs (env.VMAddress); nil on a node that
	// serves no slices.
	Hypervisor host.Hypervisor
	// HostKey is the server's host key, for SSH and, as the key of its
	// self-signed TLS certificate, for links (sshlink); nil loads (or
	// first makes) an ed25519 key in StateDir/terminal/host_key.
	HostKey ed25519.PrivateKey
	// SFTPServer is the sftp-server binary run as a real account for the
	// sftp subsystem; empty means the first of the usual OpenSSH paths
	// that exists. Accounts run as hostd itself (the sim) are served
	// in-process instead.
	SFTPServer string
	// DialTimeout bounds dialling a VM or a forwarded port (default 10s).
	DialTimeout time.Duration
	// HandshakeTimeout bounds a connection's SSH handshake and
	// authentication (default 30s); an established connection has none.
	HandshakeTimeout time.Duration
	// Volumes are the node's volumes, served to volume tickets (volume.go);
	// nil: volume tickets are refused. VolumeSFTP is the command (and its
	// first arguments) that serves sftp on one (hostd/volsftp; default
	// this executable's `hostd volume-sftp`); VolumeSessionMax bounds a
	// volume session (default DefaultVolumeSessionMax).
	Volumes          volume.Store
	VolumeSFTP       []string
	VolumeSessionMax time.Duration
	Now              func() time.Time
	Log              *slog.Logger
}

// CheckAndSetDefaults validates c and fills defaults.
func (c *Config) CheckAndSetDefaults() error {
	if c.StateDir == "" || c.Accounts == nil {
		return errors.New("terminal: StateDir and Accounts are required")
	}
	if c.HostKey != nil && len(c.HostKey) != ed25519.PrivateKeySize {
		return errors.New("terminal: HostKey is not an ed25519 private key")
	}
	if c.DialTimeout <= 0 {
		c.DialTimeout = 10 * time.Second
	}
	if c.HandshakeTimeout <= 0 {
		c.HandshakeTimeout = 30 * time.Second
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.Log == nil {
		c.Log = slog.New(slog.DiscardHandler)
	}
	if c.SFTPServer == "" {
		c.SFTPServer = FindSFTPServer()
	}
	if c.VolumeSessionMax <= 0 {
		c.VolumeSessionMax = DefaultVolumeSessionMax
	}
	if len(c.VolumeSFTP) == 0 {
		exe, err := os.Executable()
		if err != nil {
			return fmt.Errorf("terminal: %w", err)
		}
		c.VolumeSFTP = []string{exe, "hostd", "volume-sftp"}
	}
	return nil
}

// FindSFTPServer is the path of the system's OpenSSH sftp-server, "" when
// none is installed where distributions put it.
func FindSFTPServer() string {
	for _, p := range sftpServerPaths {
		if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() {
			return p
		}
	}
	return ""
}

// sftpServerPaths are where distributions install OpenSSH's sftp-server.
var sftpServerPaths = []string{
	"/usr/lib/openssh/sftp-server",     // Debian, Ubuntu
	"/usr/libexec/openssh/sftp-server", // RHEL, Fedora
	"/usr/lib/ssh/sftp-server",         // Arch
	"/usr/libexec/sftp-server",         // Alpine, BSDs
}

// Server is a node's terminal endpoint. Tell it the node it serves
// (SetNode) and the ticket CA keys to trust (SetTrusted); until both are
// known every connection is refused.
type Server struct {
	cfg    Config
	srv    *ssh.Server
	signer gossh.Signer // the host key's
	replay *replaySet
	links  linkSet
	envs   *env.Factory // the allocations' environments
	// volumesBusy holds the ids of volumes a session has mounted (volume.go).
	volumesBusy sync.Map

	// mu protects the following.
	mu      sync.Mutex
	node    string
	shape   string
	trusted []gossh.PublicKey
}

// New returns a Server; Serve runs it.
func New(cfg Config) (*Server, error) {
	if err := cfg.CheckAndSetDefaults(); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(filepath.Join(cfg.StateDir, "terminal"), 0o700); err != nil {
		return nil, fmt.Errorf("terminal: %w", err)
	}
	if cfg.HostKey == nil {
		k, err := loadOrMakeKey(filepath.Join(cfg.StateDir, "terminal", "host_key"))
		if err != nil {
			return nil, fmt.Errorf("terminal host key: %w", err)
		}
		cfg.HostKey = k
	}
	signer, err := gossh.NewSignerFromKey(cfg.HostKey)
	if err != nil {
		return nil, fmt.Errorf("terminal host key: %w", err)
	}
	envs, err := env.NewFactory(env.Config{StateDir: cfg.StateDir, Accounts: cfg.Accounts, Hypervisor: cfg.Hypervisor,
		SFTPServer: cfg.SFTPServer, DialTimeout: cfg.DialTimeout, Log: cfg.Log})
	if err != nil {
		return nil, fmt.Errorf("terminal: %w", err)
	}
	s := &Server{cfg: cfg, signer: signer, envs: envs, replay: newReplaySet(), links: linkSet{m: map[*sshlink.Conn]struct{}{}}}
	s.srv = &ssh.Server{
		Version:                  "gpuaas-hostd",
		HostSigners:              []ssh.Signer{signer},
		PublicKeyHandler:         s.offered,
		ServerConfigCallback:     s.serverConfig,
		ConnectionFailedCallback: s.handshakeFailed,
		ConnCallback: func(ctx ssh.Context, c net.Conn) net.Conn {
			// Cleared once a ticket is accepted: a client that stalls the
			// handshake does not hold a connection forever.
			_ = c.SetDeadline(time.Now().Add(cfg.HandshakeTimeout))
			ctx.SetValue(connKey{}, &conn{s: s, nc: c})
			return ownDeadline{c}
		},
		// No "default" entries: other channel types are rejected as
		// unknown, and every other global request is answered false.
		ChannelHandlers: map[string]ssh.ChannelHandler{
			"session":      s.handleSession,
			"direct-tcpip": s.handleDirectTCPIP,
		},
		RequestHandlers: map[string]ssh.RequestHandler{
			sshwire.ForwardRequest:       s.handleForward,
			sshwire.CancelForwardRequest: s.handleForward,
		},
	}
	return s, nil
}

// SetNode tells the server which node it is (tickets must name it) and the
// node's shape: api.ShapeGPUSlice hops into the allocation's VM,
// api.ShapeBaremetal serves the POSIX user on the node. With an empty
// shape, an allocation with a VM key on this node is a slice.
func (s *Server) SetNode(id, shape string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.node, s.shape = id, shape
}

// SetTrusted replaces the trusted ticket CA keys (controld's internal CA,
// both keys during a rotation). Connections already in are kept; new ones
// are checked against the new list. Certificates are not CA keys and are
// dropped.
func (s *Server) SetTrusted(keys []gossh.PublicKey) {
	var plain []gossh.PublicKey
	for _, k := range keys {
		if _, cert := k.(*gossh.Certificate); k != nil && !cert {
			plain = append(plain, k)
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.trusted = plain
}

// HostKey is the public half of the server's host key.
func (s *Server) HostKey() gossh.PublicKey { return s.signer.PublicKey() }

func (s *Server) state() (node, shape string, trusted []gossh.PublicKey) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.node, s.shape, slices.Clone(s.trusted)
}

// Serve accepts connections on ln until Close; it returns nil after Close.
// Each connection is SSH or a link (sshlink), told apart by its first
// byte (see link.go).
func (s *Server) Serve(ln net.Listener) error {
	sl := s.sniffing(ln)
	err := s.srv.Serve(sl)
	_ = sl.Close()
	if errors.Is(err, ssh.ErrServerClosed) {
		return nil
	}
	return err
}

// Close stops the listeners and closes every connection, links included;
// the processes of bare-metal sessions get SIGHUP, as when a client
// disconnects.
func (s *Server) Close() error {
	err := s.srv.Close()
	s.links.closeAll()
	return err
}

func (s *Server) now() time.Time { return s.cfg.Now() }

func (s *Server) handshakeFailed(c net.Conn, err error) {
	s.cfg.Log.Info("terminal connection refused", "remote", c.RemoteAddr().String(), "err", err)
}

// ownDeadline keeps the connection's deadline the server's own: the
// gliderlabs server resets it before every read and write (to none, as no
// idle timeout is configured), which would lift the handshake timeout.
type ownDeadline struct{ net.Conn }

func (ownDeadline) SetDeadline(time.Time) error { return nil }
