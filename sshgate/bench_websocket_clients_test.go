package sshgate

import (
	"bufio"
	"context"
	"crypto/sha1"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"time"
)

// wsGUID is RFC 6455's key suffix (section 1.3).
const wsGUID = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"

// wsClientsMain is BenchmarkIdleWebSockets's child process: it reads the
// dev CA (one line, newlines as '|') from stdin, starts the renter's
// WebSocket echo server on loopback and prints "listening PORT"; then,
// per line: "open HOST N" opens N WebSockets through the front at addr
// to HOST, each echoing one message, and prints "ready"; "close" closes
// every TCP connection (no close frame) and prints "closed"; EOF exits.
//
// A value starting with wsNodePrefix runs the node's process instead
// (wsNodeMain).
func wsClientsMain(addr string) int {
	if node, ok := strings.CutPrefix(addr, wsNodePrefix); ok {
		return wsNodeMain(node)
	}
	fail := func(err error) int { fmt.Fprintln(os.Stderr, "websocket clients:", err); return 1 }
	in := bufio.NewScanner(os.Stdin)
	if !in.Scan() {
		return fail(errors.New("no CA on stdin"))
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM([]byte(strings.ReplaceAll(in.Text(), "|", "\n"))) {
		return fail(errors.New("CA PEM"))
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return fail(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(wsEcho), ReadHeaderTimeout: time.Minute}
	go func() { _ = srv.Serve(ln) }()
	fmt.Println("listening", ln.Addr().(*net.TCPAddr).Port)

	var conns []net.Conn
	for in.Scan() {
		switch f := strings.Fields(in.Text()); {
		case len(f) == 3 && f[0] == "open":
			var n int
			if _, err := fmt.Sscan(f[2], &n); err != nil {
				return fail(err)
			}
			opened, err := openWebSockets(addr, f[1], pool, n)
			conns = append(conns, opened...)
			if err != nil {
				return fail(err)
			}
			fmt.Println("ready")
		case len(f) == 1 && f[0] == "close":
			for _, c := range conns {
				_ = c.Close()
			}
			conns = nil
			fmt.Println("closed")
		default:
			return fail(fmt.Errorf("unknown command %q", in.Text()))
		}
	}
	return 0
}

// openWebSockets opens n WebSockets, 16 at a time.
func openWebSockets(addr, host string, pool *x509.CertPool, n int) ([]net.Conn, error) {
	conns := make([]net.Conn, n)
	errs := make(chan error, n)
	sem := make(chan struct{}, 16)
	for i := range n {
		sem <- struct{}{}
		go func() {
			defer func() { <-sem }()
			c, err := openWebSocket(addr, host, pool, fmt.Sprintf("ping-%d", i))
			conns[i] = c
			errs <- err
		}()
	}
	var first error
	for range n {
		if err := <-errs; err != nil && first == nil {
			first = err
		}
	}
	return conns, first
}

// openWebSocket upgrades a TLS connection to the front at addr for host
// (HTTP/1.1, RFC 6455 section 4.1) and has msg echoed.
func openWebSocket(addr, host string, pool *x509.CertPool, msg string) (net.Conn, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	d := tls.Dialer{Config: &tls.Config{RootCAs: pool, ServerName: host, NextProtos: []string{"http/1.1"}}}
	c, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("dial the front: %w", err)
	}
	if dl, ok := ctx.Deadline(); ok {
		_ = c.SetDeadline(dl)
	}
	key := base64.StdEncoding.EncodeToString([]byte(fmt.Sprintf("%016s", msg))[:16])
	fmt.Fprintf(c, "GET /ws HTTP/1.1\r\nHost: %s\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: %s\r\nSec-WebSocket-Version: 13\r\n\r\n", host, key)
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		c.Close()
		return nil, fmt.Errorf("upgrade: %w", err)
	}
	if resp.StatusCode != http.StatusSwitchingProtocols || resp.Header.Get("Sec-WebSocket-Accept") != wsAccept(key) {
		c.Close()
		return nil, fmt.Errorf("upgrade: %s, accept %q", resp.Status, resp.Header.Get("Sec-WebSocket-Accept"))
	}
	// A client's frame is masked (section 5.3); a zero mask keeps it plain.
	frame := append([]byte{0x81, 0x80 | byte(len(msg)), 0, 0, 0, 0}, msg...)
	if _, err := c.Write(frame); err != nil {
		c.Close()
		return nil, fmt.Errorf("send: %w", err)
	}
	got := make([]byte, 2+len(msg))
	if _, err := io.ReadFull(br, got); err != nil || string(got[2:]) != msg {
		c.Close()
		return nil, fmt.Errorf("echo: %q, %v; want %q", got, err, msg)
	}
	_ = c.SetDeadline(time.Time{})
	return c, nil
}

func wsAccept(key string) string {
	h := sha1.Sum([]byte(key + wsGUID))
	return base64.StdEncoding.EncodeToString(h[:])
}

// wsEcho is the renter's server: it upgrades /ws and echoes short text
// frames (payload under 126 bytes) until the connection ends.
func wsEcho(w http.ResponseWriter, r *http.Request) {
	key := r.Header.Get("Sec-WebSocket-Key")
	if r.URL.Path != "/ws" || key == "" {
		http.NotFound(w, r)
		return
	}
	c, rw, err := http.NewResponseController(w).Hijack()
	if err != nil {
		return
	}
	defer c.Close()
	fmt.Fprintf(rw, "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: %s\r\n\r\n", wsAccept(key))
	if rw.Flush() != nil {
		return
	}
	for {
		var head [6]byte // opcode, masked length < 126, mask
		if _, err := io.ReadFull(rw, head[:]); err != nil {
			return
		}
		payload := make([]byte, head[1]&0x7f)
		if _, err := io.ReadFull(rw, payload); err != nil {
			return
		}
		for i := range payload {
			payload[i] ^= head[2+i%4]
		}
		if _, err := rw.Write(append([]byte{0x81, byte(len(payload))}, payload...)); err != nil || rw.Flush() != nil {
			return
		}
	}
}
