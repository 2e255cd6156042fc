package bus

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"strings"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nkeys"
)

// WithKey makes the connection prove it holds kp by signing the server's
// nonce (kp's public key is its identity: controld, a node, a gateway, or
// an ephemeral key of a client that has not logged in yet).
func WithKey(kp nkeys.KeyPair) nats.Option {
	pub, _ := kp.PublicKey()
	return nats.Nkey(pub, kp.Sign)
}

// KeyFromEd25519Seed turns a raw Ed25519 seed (a hostd node key) into the
// user nkey with the same key, so the node's enrolled key is also its NATS
// identity.
func KeyFromEd25519Seed(seed []byte) (nkeys.KeyPair, error) {
	kp, err := nkeys.FromRawSeed(nkeys.PrefixByteUser, seed)
	if err != nil {
		return nil, fmt.Errorf("node key as nkey: %w", err)
	}
	return kp, nil
}

// PublicKeyNkey encodes a raw Ed25519 public key as a user nkey.
func PublicKeyNkey(pub []byte) (string, error) {
	s, err := nkeys.Encode(nkeys.PrefixByteUser, pub)
	if err != nil {
		return "", err
	}
	return string(s), nil
}

// TLS configures TLS on a client connection.
type TLS struct {
	// CAFile or CAPEM are the CA(s) the server's certificate must chain
	// to; empty means the system roots.
	CAFile string
	CAPEM  []byte
	// CertFile and KeyFile are a client certificate, for servers that
	// verify clients.
	CertFile, KeyFile string
	// AllowPlaintext lets a connection to a server that is not on this
	// machine go without TLS (refused otherwise).
	AllowPlaintext bool
}

// Enabled reports whether t asks for TLS.
func (t TLS) Enabled() bool {
	return t.CAFile != "" || len(t.CAPEM) > 0 || t.CertFile != ""
}

// ErrPlaintext is returned for a plaintext connection to a server that is
// not on this machine.
var ErrPlaintext = errors.New("refusing a plaintext NATS connection to a remote server")

// Options turns t into connection options for serverURL: TLS when asked for
// (or when the URL says tls://), and ErrPlaintext for a plaintext
// connection to a non-loopback server unless AllowPlaintext is set.
func (t TLS) Options(serverURL string) ([]nats.Option, error) {
	if !t.Enabled() {
		if !t.AllowPlaintext && !isTLSURL(serverURL) && !allLoopback(serverURL) {
			return nil, fmt.Errorf("%w %s: give the server's CA (--nats-ca, or `gpuaas context add --ca`) or allow plaintext explicitly",
				ErrPlaintext, serverURL)
		}
		return nil, nil
	}
	cfg := &tls.Config{MinVersion: tls.VersionTLS12}
	pemData := t.CAPEM
	if t.CAFile != "" {
		data, err := os.ReadFile(t.CAFile)
		if err != nil {
			return nil, fmt.Errorf("nats CA: %w", err)
		}
		pemData = append(append([]byte{}, pemData...), data...)
	}
	if len(pemData) > 0 {
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pemData) {
			return nil, errors.New("nats CA: no PEM certificate in it")
		}
		cfg.RootCAs = pool
	}
	if t.CertFile != "" || t.KeyFile != "" {
		cert, err := tls.LoadX509KeyPair(t.CertFile, t.KeyFile)
		if err != nil {
			return nil, fmt.Errorf("nats client certificate: %w", err)
		}
		cfg.Certificates = []tls.Certificate{cert}
	}
	return []nats.Option{nats.Secure(cfg)}, nil
}

func isTLSURL(serverURL string) bool {
	for u := range strings.SplitSeq(serverURL, ",") {
		if !strings.HasPrefix(strings.TrimSpace(u), "tls://") {
			return false
		}
	}
	return true
}

// allLoopback reports whether every server in a comma-separated URL list
// is on this machine.
func allLoopback(serverURL string) bool {
	for raw := range strings.SplitSeq(serverURL, ",") {
		raw = strings.TrimSpace(raw)
		if !strings.Contains(raw, "://") {
			raw = "nats://" + raw
		}
		u, err := url.Parse(raw)
		if err != nil {
			return false
		}
		host := u.Hostname()
		if host == "localhost" {
			continue
		}
		ip := net.ParseIP(host)
		if ip == nil || !ip.IsLoopback() {
			return false
		}
	}
	return true
}
