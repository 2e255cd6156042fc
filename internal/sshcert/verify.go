package sshcert

import (
	"fmt"
	"maps"
	"math"
	"net"
	"slices"
	"time"

	"golang.org/x/crypto/ssh"
)

// Identity is what a verified user certificate says about its holder.
type Identity struct {
	// UserID is the certificate's principal: the gpuaas user id.
	UserID string `json:"user_id"`
	// KeyID is the certificate's key id (the user's email when minted by SignUser).
	KeyID       string    `json:"key_id"`
	Serial      uint64    `json:"serial"`
	ValidAfter  time.Time `json:"valid_after"`
	ValidBefore time.Time `json:"valid_before"`
	// Extensions are the certificate's extensions (permit-pty, ...); the
	// server decides what to allow from them.
	Extensions map[string]string `json:"extensions,omitempty"`
	// SessionID is the login session the certificate was minted under
	// (ExtensionSessionID); empty for a certificate that names none.
	SessionID string `json:"session_id,omitempty"`
	// CA is the SHA256 fingerprint of the CA key that signed the certificate
	// (which key, during a rotation).
	CA string `json:"ca"`
}

// VerifyUser checks that key is a user certificate, signed by one of trusted,
// valid at now, with no critical options, for wantPrincipal — or, when
// wantPrincipal is empty, for exactly one principal, which becomes the
// UserID. Critical options are all refused, source-address included: SignUser
// never sets any, so one can only come from a certificate gpuaas did not mean
// to mint. Tickets (which carry critical options) are therefore refused too.
func VerifyUser(trusted []ssh.PublicKey, key ssh.PublicKey, wantPrincipal string, now time.Time) (Identity, error) {
	cert, err := checkCert(trusted, key, ssh.UserCert, now)
	if err != nil {
		return Identity{}, fmt.Errorf("verify user certificate: %w", err)
	}
	if len(cert.CriticalOptions) > 0 {
		return Identity{}, fmt.Errorf("verify user certificate %q: %w: %v", cert.KeyId, ErrCriticalOption, slices.Sorted(maps.Keys(cert.CriticalOptions)))
	}
	principal, err := onePrincipal(cert, wantPrincipal)
	if err != nil {
		return Identity{}, fmt.Errorf("verify user certificate %q: %w", cert.KeyId, err)
	}
	if err := recheck(cert, principal, nil, now); err != nil {
		return Identity{}, fmt.Errorf("verify user certificate %q: %w", cert.KeyId, err)
	}
	return Identity{
		UserID:      principal,
		KeyID:       cert.KeyId,
		Serial:      cert.Serial,
		ValidAfter:  time.Unix(int64(cert.ValidAfter), 0).UTC(),
		ValidBefore: time.Unix(int64(cert.ValidBefore), 0).UTC(),
		Extensions:  maps.Clone(cert.Extensions),
		SessionID:   cert.Extensions[ExtensionSessionID],
		CA:          ssh.FingerprintSHA256(cert.SignatureKey),
	}, nil
}

// VerifyTicket checks that key is a ticket from one of trusted (the internal
// CA) for this node, valid at now: a user certificate with exactly the three
// gpuaas critical options (and OptionWorkload, optional), non-empty, whose one principal is the POSIX user,
// and whose window is no longer than MaxTicketTTL+TicketSkew. Replay (the
// same serial twice) is for hostd to refuse; the serial is returned.
func VerifyTicket(trusted []ssh.PublicKey, key ssh.PublicKey, node string, now time.Time) (Ticket, error) {
	cert, err := checkCert(trusted, key, ssh.UserCert, now)
	if err != nil {
		return Ticket{}, fmt.Errorf("verify ticket: %w", err)
	}
	known := []string{OptionNode, OptionAllocation, OptionPosixUser}
	for opt := range cert.CriticalOptions {
		if !slices.Contains(known, opt) && opt != OptionWorkload {
			return Ticket{}, fmt.Errorf("verify ticket %q: %w: unknown %q", cert.KeyId, ErrCriticalOption, opt)
		}
	}
	for _, opt := range known {
		if !validName(cert.CriticalOptions[opt]) {
			return Ticket{}, fmt.Errorf("verify ticket %q: %w: %s missing or empty", cert.KeyId, ErrCriticalOption, opt)
		}
	}
	t := Ticket{
		Node:        cert.CriticalOptions[OptionNode],
		Allocation:  cert.CriticalOptions[OptionAllocation],
		PosixUser:   cert.CriticalOptions[OptionPosixUser],
		Workload:    cert.CriticalOptions[OptionWorkload],
		KeyID:       cert.KeyId,
		Serial:      cert.Serial,
		ValidAfter:  time.Unix(int64(cert.ValidAfter), 0).UTC(),
		ValidBefore: time.Unix(int64(cert.ValidBefore), 0).UTC(),
	}
	if node == "" || t.Node != node {
		return Ticket{}, fmt.Errorf("verify ticket %q: %w: for %q, this is %q", cert.KeyId, ErrWrongNode, t.Node, node)
	}
	if len(cert.ValidPrincipals) != 1 || cert.ValidPrincipals[0] != t.PosixUser {
		return Ticket{}, fmt.Errorf("verify ticket %q: %w: principals %q, want exactly [%s]", cert.KeyId, ErrPrincipal, cert.ValidPrincipals, t.PosixUser)
	}
	if window := t.ValidBefore.Sub(t.ValidAfter); window > MaxTicketTTL+TicketSkew {
		return Ticket{}, fmt.Errorf("verify ticket %q: %w: valid for %s", cert.KeyId, ErrValidity, window)
	}
	if _, ok := cert.CriticalOptions[OptionWorkload]; ok {
		if !validName(t.Workload) {
			return Ticket{}, fmt.Errorf("verify ticket %q: %w: %s empty", cert.KeyId, ErrCriticalOption, OptionWorkload)
		}
		known = append(known, OptionWorkload)
	}
	if err := recheck(cert, t.PosixUser, known, now); err != nil {
		return Ticket{}, fmt.Errorf("verify ticket %q: %w", cert.KeyId, err)
	}
	return t, nil
}

// VerifyHost checks that key is a host certificate, signed by one of
// trusted, valid at now, with no critical options, naming hostname exactly
// among its principals (no wildcards).
func VerifyHost(trusted []ssh.PublicKey, hostname string, key ssh.PublicKey, now time.Time) error {
	cert, err := checkCert(trusted, key, ssh.HostCert, now)
	if err != nil {
		return fmt.Errorf("verify host certificate for %s: %w", hostname, err)
	}
	if len(cert.CriticalOptions) > 0 {
		return fmt.Errorf("verify host certificate for %s: %w: %v", hostname, ErrCriticalOption, slices.Sorted(maps.Keys(cert.CriticalOptions)))
	}
	if hostname == "" || !slices.Contains(cert.ValidPrincipals, hostname) {
		return fmt.Errorf("verify host certificate for %s: %w: certificate names %q", hostname, ErrPrincipal, cert.ValidPrincipals)
	}
	if err := recheck(cert, hostname, nil, now); err != nil {
		return fmt.Errorf("verify host certificate for %s: %w", hostname, err)
	}
	return nil
}

// HostKeyCallback returns an ssh.ClientConfig.HostKeyCallback that accepts
// only host certificates VerifyHost accepts for the dialled host name (the
// address without its port).
func HostKeyCallback(trusted []ssh.PublicKey, now func() time.Time) ssh.HostKeyCallback {
	trusted = slices.Clone(trusted)
	return func(addr string, _ net.Addr, key ssh.PublicKey) error {
		host, _, err := net.SplitHostPort(addr)
		if err != nil {
			host = addr
		}
		return VerifyHost(trusted, host, key, now())
	}
}

// checkCert makes the checks common to every certificate, in an order where
// nothing in the certificate is believed before its signature is: a
// certificate, of certType, signed by a trusted plain key (not by a
// certificate), with a good signature, and a bounded window containing now.
func checkCert(trusted []ssh.PublicKey, key ssh.PublicKey, certType uint32, now time.Time) (*ssh.Certificate, error) {
	cert, ok := key.(*ssh.Certificate)
	if !ok {
		typ := "no"
		if key != nil {
			typ = key.Type()
		}
		return nil, fmt.Errorf("%w: %s key", ErrNotCertificate, typ)
	}
	if cert == nil || cert.Key == nil {
		return nil, fmt.Errorf("%w: empty certificate", ErrNotCertificate)
	}
	if cert.CertType != certType {
		return nil, fmt.Errorf("%w: %s certificate, want %s", ErrWrongCertType, certTypeName(cert.CertType), certTypeName(certType))
	}
	if cert.SignatureKey == nil || isCertificate(cert.SignatureKey) {
		return nil, fmt.Errorf("%w: signature key is not a plain key", ErrUntrustedCA)
	}
	if !containsKey(trusted, cert.SignatureKey) {
		return nil, fmt.Errorf("%w: signed by %s", ErrUntrustedCA, ssh.FingerprintSHA256(cert.SignatureKey))
	}
	if cert.Signature == nil || cert.SignatureKey.Verify(bytesForSigning(cert), cert.Signature) != nil {
		return nil, fmt.Errorf("%w: signature does not verify", ErrUntrustedCA)
	}
	if cert.ValidBefore == ssh.CertTimeInfinity || cert.ValidBefore > math.MaxInt64 || cert.ValidAfter > math.MaxInt64 {
		return nil, fmt.Errorf("%w: no end of validity", ErrValidity)
	}
	if cert.ValidBefore <= cert.ValidAfter {
		return nil, fmt.Errorf("%w: empty window", ErrValidity)
	}
	unixNow := now.Unix()
	if unixNow < int64(cert.ValidAfter) {
		return nil, fmt.Errorf("%w: valid from %s", ErrNotYetValid, time.Unix(int64(cert.ValidAfter), 0).UTC().Format(time.RFC3339))
	}
	if unixNow >= int64(cert.ValidBefore) {
		return nil, fmt.Errorf("%w at %s", ErrExpired, time.Unix(int64(cert.ValidBefore), 0).UTC().Format(time.RFC3339))
	}
	return cert, nil
}

// onePrincipal returns the principal a user certificate is for: want if the
// certificate lists it, else, when want is empty, its only principal.
func onePrincipal(cert *ssh.Certificate, want string) (string, error) {
	if want != "" {
		if !slices.Contains(cert.ValidPrincipals, want) {
			return "", fmt.Errorf("%w: %q not in %q", ErrPrincipal, want, cert.ValidPrincipals)
		}
		return want, nil
	}
	if len(cert.ValidPrincipals) != 1 || !validName(cert.ValidPrincipals[0]) {
		return "", fmt.Errorf("%w: want exactly one principal, certificate has %q", ErrPrincipal, cert.ValidPrincipals)
	}
	return cert.ValidPrincipals[0], nil
}

// recheck runs x/crypto's CertChecker over a certificate the explicit checks
// accepted: a second, independent opinion on options, principal, window and
// signature. It is never the only check (its defaults accept an empty
// principal list and an infinite window).
func recheck(cert *ssh.Certificate, principal string, options []string, now time.Time) error {
	checker := &ssh.CertChecker{SupportedCriticalOptions: options, Clock: func() time.Time { return now }}
	if err := checker.CheckCert(principal, cert); err != nil {
		return fmt.Errorf("%w: %v", ErrRefused, err)
	}
	return nil
}

// bytesForSigning is the part of the certificate's wire form its signature
// covers: everything but the trailing signature field (as in x/crypto).
func bytesForSigning(cert *ssh.Certificate) []byte {
	c := *cert
	c.Signature = nil
	out := c.Marshal()
	return out[:len(out)-4]
}

func certTypeName(t uint32) string {
	switch t {
	case ssh.UserCert:
		return "user"
	case ssh.HostCert:
		return "host"
	default:
		return fmt.Sprintf("type-%d", t)
	}
}
