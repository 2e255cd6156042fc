package sshwire

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"

	gossh "golang.org/x/crypto/ssh"

	"github.com/gpuaas/gpuaas/internal/sshlink"
)

// ErrNotLoopback is returned for a direct-tcpip destination that is not
// the machine's own loopback, or a port that cannot be dialled.
var ErrNotLoopback = errors.New("destination is not loopback")

// LoopbackAddrs is the loopback-only forwarding policy of a bare-metal
// node and of a sim guest (whose loopback is the host's): the addresses
// to try, in order, for a direct-tcpip to host:port. Only "localhost"
// (127.0.0.1, then ::1), 127.0.0.0/8 and ::1 (bracketed or not) are
// loopback; other names are refused even when they resolve to loopback,
// so that no resolver is consulted.
func LoopbackAddrs(host string, port uint32) ([]string, error) {
	if port == 0 || port > 65535 {
		return nil, fmt.Errorf("%w: port %d", ErrNotLoopback, port)
	}
	p := strconv.Itoa(int(port))
	if strings.EqualFold(host, "localhost") {
		return []string{net.JoinHostPort("127.0.0.1", p), net.JoinHostPort("::1", p)}, nil
	}
	ip := net.ParseIP(strings.Trim(host, "[]"))
	if ip == nil || !ip.IsLoopback() {
		return nil, fmt.Errorf("%w: %s is not this machine's loopback", ErrNotLoopback, host)
	}
	return []string{net.JoinHostPort(ip.String(), p)}, nil
}

// DialLoopback dials d's destination under the LoopbackAddrs policy with
// dial, returning the first connection made. A destination the policy
// refuses is an ErrNotLoopback; otherwise the last dial error is
// returned.
func DialLoopback(ctx context.Context, d DirectTCPIPMsg, dial func(ctx context.Context, addr string) (net.Conn, error)) (net.Conn, error) {
	addrs, err := LoopbackAddrs(d.DestAddr, d.DestPort)
	if err != nil {
		return nil, err
	}
	for _, a := range addrs {
		var c net.Conn
		if c, err = dial(ctx, a); err == nil {
			return c, nil
		}
	}
	return nil, err
}

// AcceptAndSplice accepts nc, discards the requests made on it, and
// splices it with c until both directions are done (then both are
// closed). When nc cannot be accepted, c is closed and the error
// returned.
func AcceptAndSplice(nc gossh.NewChannel, c HalfCloser) (int64, error) {
	ch, reqs, err := nc.Accept()
	if err != nil {
		_ = c.Close()
		return 0, err
	}
	go sshlink.DiscardRequests(reqs)
	return Splice(ch, c), nil
}
