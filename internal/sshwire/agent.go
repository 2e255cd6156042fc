package sshwire

import (
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"sync"
	"syscall"

	gossh "golang.org/x/crypto/ssh"

	"github.com/gpuaas/gpuaas/internal/sshlink"
)

// Agent forwarding (OpenSSH's PROTOCOL, section 2.3): the client asks
// with a session request, and the server opens a channel towards the
// client for each connection to the socket it made for the session.
const (
	AgentRequest = "auth-agent-req@openssh.com"
	AgentChannel = "auth-agent@openssh.com"
)

// AgentSocketEnv is the variable that names a forwarded agent's socket.
const AgentSocketEnv = "SSH_AUTH_SOCK"

// AgentSocket is the Unix socket a forwarded agent is reached at, as sshd
// makes it: in a directory of its own under the system's temporary
// directory, both the user's, the directory mode 0700 — so only the user
// (and root) can reach the agent. Each connection to it becomes a channel
// opened towards the client, which connects it to the user's agent.
type AgentSocket struct {
	// Path is the socket, for AgentSocketEnv.
	Path string
	dir  string
	ln   net.Listener

	// mu protects closed.
	mu     sync.Mutex
	closed bool
}

// ListenAgent makes the socket. With cred it is given, with its
// directory, to cred's uid and gid (the caller is root); without, it is
// the caller's own. The directory is made by mkdir with a random name, so
// nothing a user left in the temporary directory can stand in for it.
func ListenAgent(cred *syscall.Credential) (*AgentSocket, error) {
	dir, err := os.MkdirTemp("", "gpuaas-agent-")
	if err != nil {
		return nil, fmt.Errorf("agent socket: %w", err)
	}
	path := filepath.Join(dir, "agent.sock")
	ln, err := net.Listen("unix", path)
	// The mode first, and the directory given away last: once it is the
	// user's, they could put a link where the socket was, and chmod
	// follows links.
	if err == nil {
		err = os.Chmod(path, 0o600)
	}
	if err == nil && cred != nil {
		err = os.Lchown(path, int(cred.Uid), int(cred.Gid))
		if err == nil {
			err = os.Lchown(dir, int(cred.Uid), int(cred.Gid))
		}
	}
	if err != nil {
		if ln != nil {
			_ = ln.Close()
		}
		_ = os.RemoveAll(dir)
		return nil, fmt.Errorf("agent socket: %w", err)
	}
	return &AgentSocket{Path: path, dir: dir, ln: ln}, nil
}

// Serve accepts connections until Close and joins each to a channel that
// open makes (an AgentChannel towards the client); a connection whose
// channel cannot be opened is closed. It returns when the socket closes.
func (a *AgentSocket) Serve(open func() (gossh.Channel, <-chan *gossh.Request, error)) {
	for {
		c, err := a.ln.Accept()
		if err != nil {
			return
		}
		go func() {
			ch, reqs, err := open()
			if err != nil {
				_ = c.Close()
				return
			}
			go sshlink.DiscardRequests(reqs)
			Splice(ch, c.(*net.UnixConn))
		}()
	}
}

// Close stops listening and removes the socket and its directory;
// connections already made go on until either end closes them.
func (a *AgentSocket) Close() error {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.closed {
		return nil
	}
	a.closed = true
	return errors.Join(a.ln.Close(), os.RemoveAll(a.dir))
}
