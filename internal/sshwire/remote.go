package sshwire

import (
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"sync"

	gossh "golang.org/x/crypto/ssh"

	"github.com/gpuaas/gpuaas/internal/sshlink"
)

// Remote forwarding (`ssh -R`, RFC 4254 §7.1): global requests to listen
// and to stop, and the channel the server opens for each connection made
// to the listener.
const (
	ForwardRequest       = "tcpip-forward"
	CancelForwardRequest = "cancel-tcpip-forward"
	ForwardedChannel     = "forwarded-tcpip"
)

// TCPIPForwardMsg is the payload of ForwardRequest and
// CancelForwardRequest: the address and port to listen on (0: any).
type TCPIPForwardMsg struct {
	BindAddr string
	BindPort uint32
}

// TCPIPForwardReply is the reply to a ForwardRequest for port 0: the port
// the server chose.
type TCPIPForwardReply struct {
	Port uint32
}

// ForwardedTCPIPMsg is the extra data of a ForwardedChannel: the address
// and port that were connected to (the address as the client asked for
// it, the port as bound), and where the connection came from.
type ForwardedTCPIPMsg struct {
	Addr       string
	Port       uint32
	OriginAddr string
	OriginPort uint32
}

// Why a remote forward is refused.
var (
	ErrPrivilegedPort  = errors.New("ports below 1024 cannot be forwarded")
	ErrTooManyForwards = errors.New("too many remote forwards on this connection")
	ErrForwardExists   = errors.New("already forwarded on this connection")
	ErrNoSuchForward   = errors.New("no such remote forward")
)

// MaxRemoteForwards is how many remote forwards one connection may hold.
const MaxRemoteForwards = 32

// ForwardListenAddrs is the loopback-only listening policy of remote
// forwarding on a node or a guest, as sshd's GatewayPorts=no: the
// addresses to listen on for a request to bindAddr. "localhost", an empty
// address and the wildcards ("*", 0.0.0.0, ::) listen on loopback
// (127.0.0.1, then ::1 when the machine has it); a loopback address
// listens there; anything else is refused (ErrNotLoopback). Port 0 is any
// free port; ports 1 to 1023 are refused (ErrPrivilegedPort), as for a
// user who is not root: the listener is the allocation's, not the node's.
func ForwardListenAddrs(bindAddr string, port uint32) ([]string, error) {
	if port > 65535 {
		return nil, fmt.Errorf("%w: port %d", ErrNotLoopback, port)
	}
	if port != 0 && port < 1024 {
		return nil, fmt.Errorf("%w: port %d", ErrPrivilegedPort, port)
	}
	p := strconv.Itoa(int(port))
	switch strings.ToLower(bindAddr) {
	case "", "*", "localhost", "0.0.0.0", "::", "[::]":
		return []string{net.JoinHostPort("127.0.0.1", p), net.JoinHostPort("::1", p)}, nil
	}
	ip := net.ParseIP(strings.Trim(bindAddr, "[]"))
	if ip == nil || !ip.IsLoopback() {
		return nil, fmt.Errorf("%w: %s: remote forwards listen on loopback only", ErrNotLoopback, bindAddr)
	}
	return []string{net.JoinHostPort(ip.String(), p)}, nil
}

// RemoteForwards holds one SSH connection's remote forwards: a listener
// per forward under ForwardListenAddrs, each connection to it carried to
// the client on a ForwardedChannel that open makes. Close (when the
// connection ends) stops them all.
type RemoteForwards struct {
	open func(extra []byte) (gossh.Channel, <-chan *gossh.Request, error)

	// mu protects the following.
	mu     sync.Mutex
	fwds   map[TCPIPForwardMsg]*remoteForward // as requested
	closed bool
}

type remoteForward struct {
	lns []net.Listener
}

// NewRemoteForwards returns an empty set whose connections are opened
// with open (a ForwardedChannel towards the client, with the extra data
// given).
func NewRemoteForwards(open func(extra []byte) (gossh.Channel, <-chan *gossh.Request, error)) *RemoteForwards {
	return &RemoteForwards{open: open, fwds: map[TCPIPForwardMsg]*remoteForward{}}
}

// Forward serves a ForwardRequest's payload: it listens and returns the
// port it listens on. Each accepted connection is announced with the
// address as requested and the port as bound, so that the client finds
// its forward (OpenSSH matches both).
func (r *RemoteForwards) Forward(payload []byte) (uint32, error) {
	var m TCPIPForwardMsg
	if err := gossh.Unmarshal(payload, &m); err != nil {
		return 0, fmt.Errorf("malformed %s request: %w", ForwardRequest, err)
	}
	addrs, err := ForwardListenAddrs(m.BindAddr, m.BindPort)
	if err != nil {
		return 0, err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	switch {
	case r.closed:
		return 0, net.ErrClosed
	case len(r.fwds) >= MaxRemoteForwards:
		return 0, ErrTooManyForwards
	case m.BindPort != 0 && r.fwds[m] != nil:
		return 0, fmt.Errorf("%w: %s:%d", ErrForwardExists, m.BindAddr, m.BindPort)
	}
	first, err := net.Listen("tcp", addrs[0])
	if err != nil {
		return 0, err
	}
	port := uint32(first.Addr().(*net.TCPAddr).Port)
	f := &remoteForward{lns: []net.Listener{first}}
	for _, a := range addrs[1:] {
		// The second family on the same port, when the machine has it:
		// "localhost" may resolve to either.
		host, _, _ := net.SplitHostPort(a)
		if ln, err := net.Listen("tcp", net.JoinHostPort(host, strconv.Itoa(int(port)))); err == nil {
			f.lns = append(f.lns, ln)
		}
	}
	key := m
	key.BindPort = port
	if r.fwds[key] != nil {
		// Port 0 gave a port this connection already forwards under the
		// same name: cannot happen while that listener holds it.
		f.close()
		return 0, fmt.Errorf("%w: %s:%d", ErrForwardExists, m.BindAddr, port)
	}
	r.fwds[key] = f
	for _, ln := range f.lns {
		go r.accept(ln, m.BindAddr, port)
	}
	return port, nil
}

// accept carries each connection to ln to the client until ln closes.
func (r *RemoteForwards) accept(ln net.Listener, addr string, port uint32) {
	for {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		go func() {
			origin := c.RemoteAddr().(*net.TCPAddr)
			ch, reqs, err := r.open(gossh.Marshal(ForwardedTCPIPMsg{Addr: addr, Port: port,
				OriginAddr: origin.IP.String(), OriginPort: uint32(origin.Port)}))
			if err != nil {
				_ = c.Close()
				return
			}
			go sshlink.DiscardRequests(reqs)
			Splice(ch, c.(*net.TCPConn))
		}()
	}
}

// Cancel serves a CancelForwardRequest's payload: the forward stops
// listening (connections already made go on).
func (r *RemoteForwards) Cancel(payload []byte) error {
	var m TCPIPForwardMsg
	if err := gossh.Unmarshal(payload, &m); err != nil {
		return fmt.Errorf("malformed %s request: %w", CancelForwardRequest, err)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	f := r.fwds[m]
	if f == nil {
		return fmt.Errorf("%w: %s:%d", ErrNoSuchForward, m.BindAddr, m.BindPort)
	}
	delete(r.fwds, m)
	f.close()
	return nil
}

// Close stops every forward; later requests are refused.
func (r *RemoteForwards) Close() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.closed = true
	for k, f := range r.fwds {
		f.close()
		delete(r.fwds, k)
	}
}

func (f *remoteForward) close() {
	for _, ln := range f.lns {
		_ = ln.Close()
	}
}

// ForwardSet is the remote forwards a relay (the gateway, or hostd's hop
// into a VM) asked the server behind it for and was granted: a
// ForwardedChannel that server opens is let through only when it names
// one of them, so a server cannot push connections the client never
// asked for.
type ForwardSet struct {
	// mu protects m.
	mu sync.Mutex
	m  map[TCPIPForwardMsg]bool
}

// Granted notes the forward of a ForwardRequest payload the server
// granted; its reply tells the port when the request asked for port 0.
func (s *ForwardSet) Granted(request, reply []byte) {
	var m TCPIPForwardMsg
	if gossh.Unmarshal(request, &m) != nil {
		return
	}
	if m.BindPort == 0 {
		var r TCPIPForwardReply
		if gossh.Unmarshal(reply, &r) != nil {
			return
		}
		m.BindPort = r.Port
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.m == nil {
		s.m = map[TCPIPForwardMsg]bool{}
	}
	s.m[m] = true
}

// Canceled forgets the forward of a CancelForwardRequest payload.
func (s *ForwardSet) Canceled(request []byte) {
	var m TCPIPForwardMsg
	if gossh.Unmarshal(request, &m) != nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.m, m)
}

// Allows reports whether a ForwardedChannel's extra data names a granted
// forward, and returns what it names.
func (s *ForwardSet) Allows(extra []byte) (ForwardedTCPIPMsg, bool) {
	var m ForwardedTCPIPMsg
	if gossh.Unmarshal(extra, &m) != nil {
		return m, false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return m, s.m[TCPIPForwardMsg{BindAddr: m.Addr, BindPort: m.Port}]
}

// ForwardReply is the reply to a granted ForwardRequest: the port bound
// when the request asked for port 0 (RFC 4254 §7.1), nothing otherwise.
func ForwardReply(request []byte, port uint32) []byte {
	var m TCPIPForwardMsg
	if gossh.Unmarshal(request, &m) == nil && m.BindPort == 0 {
		return gossh.Marshal(TCPIPForwardReply{Port: port})
	}
	return nil
}
