package httpfront

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"
)

// DevCA is `gpuaas dev`'s certificate authority for the HTTPS front: it
// signs a certificate for each exposure name as a client asks for it
// (SNI), so no wildcard under "localhost" is needed (browsers refuse
// wildcards that close to a top-level name). Trusting its CertPEM (one
// line `gpuaas dev` prints) makes the names valid for curl and browsers.
type DevCA struct {
	cert    *x509.Certificate
	key     *ecdsa.PrivateKey
	CertPEM []byte
	// CertFile is where CertPEM is, for the trust line.
	CertFile string
	// mu protects leaves.
	mu     sync.Mutex
	leaves map[string]*tls.Certificate
}

// LoadOrCreateDevCA reads the CA in dir (ca.pem, ca-key.pem), making it
// the first time.
func LoadOrCreateDevCA(dir string, now time.Time) (*DevCA, error) {
	certFile, keyFile := filepath.Join(dir, "ca.pem"), filepath.Join(dir, "ca-key.pem")
	certPEM, err1 := os.ReadFile(certFile)
	keyPEM, err2 := os.ReadFile(keyFile)
	if errors.Is(err1, os.ErrNotExist) && errors.Is(err2, os.ErrNotExist) {
		return createDevCA(dir, certFile, keyFile, now)
	}
	if err1 != nil || err2 != nil {
		return nil, fmt.Errorf("dev ca: %w", errors.Join(err1, err2))
	}
	cb, _ := pem.Decode(certPEM)
	kb, _ := pem.Decode(keyPEM)
	if cb == nil || kb == nil {
		return nil, fmt.Errorf("dev ca: %s or %s is not PEM", certFile, keyFile)
	}
	cert, err := x509.ParseCertificate(cb.Bytes)
	if err != nil {
		return nil, fmt.Errorf("dev ca: %w", err)
	}
	key, err := x509.ParseECPrivateKey(kb.Bytes)
	if err != nil {
		return nil, fmt.Errorf("dev ca: %w", err)
	}
	return &DevCA{cert: cert, key: key, CertPEM: certPEM, CertFile: certFile, leaves: map[string]*tls.Certificate{}}, nil
}

func createDevCA(dir, certFile, keyFile string, now time.Time) (*DevCA, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("dev ca: %w", err)
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("dev ca: %w", err)
	}
	tmpl := &x509.Certificate{SerialNumber: serial(), Subject: pkix.Name{CommonName: "gpuaas dev CA"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.AddDate(5, 0, 0), IsCA: true, BasicConstraintsValid: true,
		MaxPathLenZero: true, KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageCRLSign}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, fmt.Errorf("dev ca: %w", err)
	}
	cert, _ := x509.ParseCertificate(der)
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return nil, fmt.Errorf("dev ca: %w", err)
	}
	certPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	if err := os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}), 0o600); err != nil {
		return nil, fmt.Errorf("dev ca: %w", err)
	}
	if err := os.WriteFile(certFile, certPEM, 0o644); err != nil {
		return nil, fmt.Errorf("dev ca: %w", err)
	}
	return &DevCA{cert: cert, key: key, CertPEM: certPEM, CertFile: certFile, leaves: map[string]*tls.Certificate{}}, nil
}

func serial() *big.Int {
	n, _ := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	return n
}

// TLSConfig serves names directly under domain (and domain itself) with
// certificates this CA signs on first use.
func (ca *DevCA) TLSConfig(domain string, now func() time.Time) *tls.Config {
	domain = strings.ToLower(strings.Trim(domain, "."))
	return &tls.Config{MinVersion: tls.VersionTLS12, GetCertificate: func(hello *tls.ClientHelloInfo) (*tls.Certificate, error) {
		name := strings.ToLower(strings.TrimSuffix(hello.ServerName, "."))
		label, under := strings.CutSuffix(name, "."+domain)
		if name != domain && (!under || label == "" || strings.Contains(label, ".")) {
			return nil, fmt.Errorf("dev ca: %q is not a name under %s", hello.ServerName, domain)
		}
		return ca.leaf(name, now())
	}}
}

// leaf is the certificate for name, signed once and kept until a day
// before it expires.
func (ca *DevCA) leaf(name string, now time.Time) (*tls.Certificate, error) {
	ca.mu.Lock()
	defer ca.mu.Unlock()
	if c := ca.leaves[name]; c != nil && now.Before(c.Leaf.NotAfter.Add(-24*time.Hour)) {
		return c, nil
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	tmpl := &x509.Certificate{SerialNumber: serial(), Subject: pkix.Name{CommonName: name},
		NotBefore: now.Add(-time.Hour), NotAfter: now.AddDate(0, 0, 30), DNSNames: []string{name},
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		return nil, fmt.Errorf("dev ca: sign %s: %w", name, err)
	}
	leaf, _ := x509.ParseCertificate(der)
	c := &tls.Certificate{Certificate: [][]byte{der, ca.cert.Raw}, PrivateKey: key, Leaf: leaf}
	ca.leaves[name] = c
	return c, nil
}
