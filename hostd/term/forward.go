package term

import (
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"sync"

	gossh "golang.org/x/crypto/ssh"
)

func (t *localTarget) directTCPIP(nc gossh.NewChannel, d forwardDest) {
	addrs, err := loopbackAddrs(d.Host, d.Port)
	if err != nil {
		t.s.refuseChannel(nc, gossh.Prohibited, "direct-tcpip", err)
		return
	}
	var c net.Conn
	for _, a := range addrs {
		if c, err = t.s.dial(t.ctx, a); err == nil {
			break
		}
	}
	if err != nil {
		t.s.refuseChannel(nc, gossh.ConnectionFailed, "direct-tcpip", err)
		return
	}
	ch, reqs, err := nc.Accept()
	if err != nil {
		_ = c.Close()
		return
	}
	go gossh.DiscardRequests(reqs)
	splice(ch, c.(*net.TCPConn))
}

// loopbackAddrs is the forwarding policy for bare metal: only the node's
// own loopback, named as "localhost", 127.0.0.0/8 or ::1. The user already
// has a shell on the node and can reach whatever it can; hostd (root) is
// not to be a hop to other hosts' services from inside the fleet's
// network. Other names are refused even when they resolve to loopback,
// so that no resolver is consulted.
func loopbackAddrs(h string, port uint32) ([]string, error) {
	if port == 0 || port > 65535 {
		return nil, fmt.Errorf("%w: port %d", ErrForwardDenied, port)
	}
	p := strconv.Itoa(int(port))
	if strings.EqualFold(h, "localhost") {
		return []string{net.JoinHostPort("127.0.0.1", p), net.JoinHostPort("::1", p)}, nil
	}
	ip := net.ParseIP(strings.Trim(h, "[]"))
	if ip == nil || !ip.IsLoopback() {
		return nil, fmt.Errorf("%w: %s is not this node's loopback", ErrForwardDenied, h)
	}
	return []string{net.JoinHostPort(ip.String(), p)}, nil
}

// halfCloser is a stream that can send EOF and keep reading.
type halfCloser interface {
	io.ReadWriteCloser
	CloseWrite() error
}

// splice copies both ways between a and b, passing EOF on, and closes
// both when both directions are done.
func splice(a, b halfCloser) {
	var wg sync.WaitGroup
	wg.Add(2)
	go func() {
		defer wg.Done()
		_, _ = io.Copy(a, b)
		_ = a.CloseWrite()
	}()
	go func() {
		defer wg.Done()
		_, _ = io.Copy(b, a)
		_ = b.CloseWrite()
	}()
	wg.Wait()
	_ = a.Close()
	_ = b.Close()
}
