package sshlink

import (
	"io"
	"net"
)

// Sniff reads without consuming whether nc starts with a TLS handshake
// record (0x16) — a link — or with an SSH version line; it returns a
// net.Conn that replays the peeked byte.
func Sniff(nc net.Conn) (net.Conn, bool, error) {
	var b [1]byte
	if _, err := io.ReadFull(nc, b[:]); err != nil {
		return nil, false, err
	}
	return &replayConn{Conn: nc, first: b[0], pending: true}, b[0] == 0x16, nil
}

type replayConn struct {
	net.Conn
	first   byte
	pending bool
}

func (r *replayConn) Read(p []byte) (int, error) {
	if r.pending && len(p) > 0 {
		r.pending = false
		p[0] = r.first
		return 1, nil
	}
	return r.Conn.Read(p)
}
