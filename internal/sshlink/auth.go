package sshlink

import (
	"bufio"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"math/big"
	"net"
	"sync"
	"time"

	gossh "golang.org/x/crypto/ssh"
)

const (
	exporterLabel  = "gpuaas sshlink auth"
	defaultTimeout = 30 * time.Second
	maxAuthMessage = 1024
)

// signedData is what the gateway (step "gateway") or ticket (step "ticket")
// key signs: a per-step label and the connection's TLS exporter value.
func signedData(step string, ekm []byte) []byte {
	b := []byte("gpuaas sshlink " + step + "\x00")
	return append(b, ekm...)
}

// ClientConfig configures the gateway's side of a link.
type ClientConfig struct {
	User            string                // the POSIX user the ticket names
	Gateway         gossh.Signer          // the gateway certificate's signer
	Ticket          gossh.Signer          // the ticket certificate's signer
	HostKeyCallback gossh.HostKeyCallback // the pin, called with (addr, remote, leaf key)
	Timeout         time.Duration         // TLS handshake + AUTH; 0 = 30s
}

// ServerConfig configures the node's side of a link.
type ServerConfig struct {
	HostKey       ed25519.PrivateKey
	VerifyGateway func(key gossh.PublicKey) error              // step 1
	VerifyTicket  func(user string, key gossh.PublicKey) error // step 2
	Timeout       time.Duration
}

func timeout(d time.Duration) time.Duration {
	if d <= 0 {
		return defaultTimeout
	}
	return d
}

// Client runs the TLS handshake and AUTH on nc (already dialled). addr is
// what HostKeyCallback is given.
func Client(nc net.Conn, addr string, cfg *ClientConfig) (*Conn, <-chan gossh.NewChannel, <-chan *gossh.Request, error) {
	if cfg == nil || cfg.Gateway == nil || cfg.Ticket == nil || cfg.HostKeyCallback == nil {
		return nil, nil, nil, errors.New("sshlink: client config needs Gateway, Ticket and HostKeyCallback")
	}
	tc := tls.Client(&coalescer{Conn: nc}, &tls.Config{
		MinVersion:         tls.VersionTLS13,
		InsecureSkipVerify: true, // the pin below replaces chain checks
		VerifyConnection: func(cs tls.ConnectionState) error {
			if len(cs.PeerCertificates) == 0 {
				return fmt.Errorf("%w: no certificate", ErrHostKey)
			}
			pub, err := gossh.NewPublicKey(cs.PeerCertificates[0].PublicKey)
			if err != nil {
				return fmt.Errorf("%w: %w", ErrHostKey, err)
			}
			if err := cfg.HostKeyCallback(addr, nc.RemoteAddr(), pub); err != nil {
				return fmt.Errorf("%w: %w", ErrHostKey, err)
			}
			return nil
		},
	})
	return establish(nc, tc, cfg.Timeout, func(ekm []byte) (*Conn, error) { return clientAuth(tc, ekm, cfg) })
}

// establish runs the TLS handshake on tc (over nc) and then auth, with
// the exporter value auth binds to, all within timeout; on failure the
// connection is closed.
func establish(nc net.Conn, tc *tls.Conn, d time.Duration, auth func(ekm []byte) (*Conn, error)) (*Conn, <-chan gossh.NewChannel, <-chan *gossh.Request, error) {
	_ = nc.SetDeadline(time.Now().Add(timeout(d)))
	c, err := func() (*Conn, error) {
		if err := tc.Handshake(); err != nil {
			return nil, fmt.Errorf("sshlink: tls handshake: %w", err)
		}
		cs := tc.ConnectionState()
		ekm, err := cs.ExportKeyingMaterial(exporterLabel, nil, 32)
		if err != nil {
			return nil, err
		}
		return auth(ekm)
	}()
	if err != nil {
		tc.Close()
		return nil, nil, nil, err
	}
	_ = nc.SetDeadline(time.Time{})
	return c, c.incomingChans, c.incomingReqs, nil
}

func clientAuth(tc *tls.Conn, ekm []byte, cfg *ClientConfig) (*Conn, error) {
	msg, err := authFrame(cfg.User, cfg.Gateway, cfg.Ticket, ekm)
	if err != nil {
		return nil, err
	}
	if _, err := tc.Write(msg); err != nil {
		return nil, err
	}
	br := bufio.NewReaderSize(tc, readBufSize)
	var hdr [headerLen]byte
	typ, _, n, err := readHeader(br, &hdr)
	if err != nil {
		return nil, fmt.Errorf("sshlink: reading auth answer: %w", err)
	}
	switch typ {
	case frameAuthOK:
		if n != 0 {
			return nil, protoErr("auth ok with payload")
		}
	case frameAuthFail:
		if n > maxAuthMessage {
			return nil, protoErr("auth failure message too long")
		}
		p := make([]byte, n)
		if _, err := io.ReadFull(br, p); err != nil {
			return nil, err
		}
		return nil, fmt.Errorf("%w: %s", ErrAuth, p)
	default:
		return nil, protoErr("unexpected frame %d during auth", typ)
	}
	return newConn(tc, br, cfg.User, ekm, true), nil
}

// authFrame builds the AUTH frame: user, gateway key + signature, ticket key
// + signature, each signature over signedData(step, ekm).
func authFrame(user string, gw, ticket gossh.Signer, ekm []byte) ([]byte, error) {
	gsig, err := gw.Sign(rand.Reader, signedData("gateway", ekm))
	if err != nil {
		return nil, err
	}
	tsig, err := ticket.Sign(rand.Reader, signedData("ticket", ekm))
	if err != nil {
		return nil, err
	}
	p := appendString(nil, []byte(user))
	p = appendString(p, gw.PublicKey().Marshal())
	p = appendString(p, gossh.Marshal(gsig))
	p = appendString(p, ticket.PublicKey().Marshal())
	p = appendString(p, gossh.Marshal(tsig))
	b := make([]byte, headerLen, headerLen+len(p))
	putHeader(b, frameAuth, 0, len(p))
	return append(b, p...), nil
}

var (
	certMu    sync.Mutex
	certCache = map[string]tls.Certificate{}
)

// hostCert returns a self-signed certificate for the host key (cached).
func hostCert(key ed25519.PrivateKey) (tls.Certificate, error) {
	certMu.Lock()
	defer certMu.Unlock()
	pub := key.Public().(ed25519.PublicKey)
	if c, ok := certCache[string(pub)]; ok {
		return c, nil
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1),
		NotBefore:    time.Unix(0, 0),
		NotAfter:     time.Date(9999, 12, 31, 0, 0, 0, 0, time.UTC),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, pub, key)
	if err != nil {
		return tls.Certificate{}, err
	}
	c := tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
	certCache[string(pub)] = c
	return c, nil
}

// Server runs the TLS handshake and checks the client's AUTH frame on nc.
func Server(nc net.Conn, cfg *ServerConfig) (*Conn, <-chan gossh.NewChannel, <-chan *gossh.Request, error) {
	if cfg == nil || cfg.HostKey == nil || cfg.VerifyGateway == nil || cfg.VerifyTicket == nil {
		return nil, nil, nil, errors.New("sshlink: server config needs HostKey, VerifyGateway and VerifyTicket")
	}
	cert, err := hostCert(cfg.HostKey)
	if err != nil {
		return nil, nil, nil, err
	}
	tc := tls.Server(&coalescer{Conn: nc}, &tls.Config{MinVersion: tls.VersionTLS13, Certificates: []tls.Certificate{cert}})
	return establish(nc, tc, cfg.Timeout, func(ekm []byte) (*Conn, error) { return serverAuth(tc, ekm, cfg) })
}

func serverAuth(tc *tls.Conn, ekm []byte, cfg *ServerConfig) (*Conn, error) {
	br := bufio.NewReaderSize(tc, readBufSize)
	var hdr [headerLen]byte
	typ, _, n, err := readHeader(br, &hdr)
	if err != nil {
		return nil, fmt.Errorf("sshlink: reading auth: %w", err)
	}
	if typ != frameAuth {
		return nil, protoErr("expected auth frame, got %d", typ)
	}
	p := make([]byte, n)
	if _, err := io.ReadFull(br, p); err != nil {
		return nil, err
	}
	user, err := checkAuth(p, ekm, cfg)
	if err != nil {
		msg := err.Error()
		if len(msg) > maxAuthMessage {
			msg = msg[:maxAuthMessage]
		}
		b := make([]byte, headerLen, headerLen+len(msg))
		putHeader(b, frameAuthFail, 0, len(msg))
		tc.Write(append(b, msg...))
		return nil, fmt.Errorf("%w: %w", ErrAuth, err)
	}
	var ok [headerLen]byte
	putHeader(ok[:], frameAuthOK, 0, 0)
	if _, err := tc.Write(ok[:]); err != nil {
		return nil, err
	}
	return newConn(tc, br, user, ekm, false), nil
}

// checkAuth parses and verifies an AUTH payload; it returns the user.
func checkAuth(p, ekm []byte, cfg *ServerConfig) (string, error) {
	var f [5][]byte
	rest := p
	for i := range f {
		var ok bool
		if f[i], rest, ok = parseString(rest); !ok {
			return "", errors.New("malformed auth frame")
		}
	}
	if len(rest) != 0 {
		return "", errors.New("malformed auth frame")
	}
	gw, err := verifySig(f[1], f[2], signedData("gateway", ekm))
	if err != nil {
		return "", fmt.Errorf("gateway: %w", err)
	}
	tk, err := verifySig(f[3], f[4], signedData("ticket", ekm))
	if err != nil {
		return "", fmt.Errorf("ticket: %w", err)
	}
	if err := cfg.VerifyGateway(gw); err != nil {
		return "", err
	}
	user := string(f[0])
	if err := cfg.VerifyTicket(user, tk); err != nil {
		return "", err
	}
	return user, nil
}

func verifySig(keyBytes, sigBytes, data []byte) (gossh.PublicKey, error) {
	key, err := gossh.ParsePublicKey(keyBytes)
	if err != nil {
		return nil, err
	}
	var sig gossh.Signature
	if err := gossh.Unmarshal(sigBytes, &sig); err != nil {
		return nil, err
	}
	// x/crypto keeps what follows the signature blob in Rest and its
	// Verify ignores it: refused, so AUTH is accepted only as it was sent.
	if len(sig.Rest) != 0 {
		return nil, errors.New("trailing data after the signature")
	}
	if err := key.Verify(data, &sig); err != nil {
		return nil, fmt.Errorf("bad signature: %w", err)
	}
	return key, nil
}
