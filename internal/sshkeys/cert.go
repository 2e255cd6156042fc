package sshkeys

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"time"

	"golang.org/x/crypto/ssh"
)

// RenewBefore is how long before its end a certificate is renewed, so a
// connection never starts with one about to lapse.
const RenewBefore = 5 * time.Minute

// ReadCert reads a certificate file (authorized_keys format). A missing
// file is an error satisfying errors.Is(err, fs.ErrNotExist).
func ReadCert(path string) (*ssh.Certificate, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read ssh certificate: %w", err)
	}
	cert, err := ParseCert(b)
	if err != nil {
		return nil, fmt.Errorf("read ssh certificate %s: %w", path, err)
	}
	return cert, nil
}

// ParseCert parses one certificate in authorized_keys format.
func ParseCert(b []byte) (*ssh.Certificate, error) {
	pub, _, _, _, err := ssh.ParseAuthorizedKey(b)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrBadCertificate, err)
	}
	cert, ok := pub.(*ssh.Certificate)
	if !ok {
		return nil, fmt.Errorf("%w: a plain %s key, not a certificate", ErrBadCertificate, pub.Type())
	}
	return cert, nil
}

// ValidBefore is the end of cert's validity; the zero time for a
// certificate that never expires.
func ValidBefore(cert *ssh.Certificate) time.Time {
	if cert.ValidBefore == ssh.CertTimeInfinity || cert.ValidBefore > 1<<62 {
		return time.Time{}
	}
	return time.Unix(int64(cert.ValidBefore), 0)
}

// Fresh reports whether cert is a user certificate for key that stays
// valid for at least RenewBefore after now. The start of validity is left
// to the server: controld backdates it, and a local clock that runs behind
// would otherwise renew on every command.
func Fresh(cert *ssh.Certificate, key ssh.PublicKey, now time.Time) bool {
	if cert == nil || cert.CertType != ssh.UserCert || !bytes.Equal(cert.Key.Marshal(), key.Marshal()) {
		return false
	}
	end := ValidBefore(cert)
	return end.IsZero() || now.Add(RenewBefore).Before(end)
}

// WriteCert stores cert at path, atomically.
func WriteCert(path string, cert *ssh.Certificate) error {
	if err := WriteFile(path, ssh.MarshalAuthorizedKey(cert), 0o644); err != nil {
		return fmt.Errorf("write ssh certificate: %w", err)
	}
	return nil
}

// RemoveCert deletes the context's certificate, keeping its key. It
// reports whether there was one.
func RemoveCert(p Paths) (bool, error) {
	err := os.Remove(p.Cert)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return false, nil
	case err != nil:
		return false, fmt.Errorf("remove ssh certificate: %w", err)
	}
	return true, nil
}
