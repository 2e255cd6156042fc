package sshcert

import (
	"fmt"
	"slices"
	"time"

	"golang.org/x/crypto/ssh"
)

// Gateway certificates. A ticket says what the gateway→hostd connection may
// open; a gateway certificate says the connection comes from a gateway at
// all. hostd asks for both, the gateway certificate first: whoever gets
// hold of a ticket (stolen in transit, or minted with a stolen gateway
// token) still has no gateway key to present, so cannot bypass sshgate and
// its recording.
//
// The internal CA signs them, for gateway keys an admin registered. A
// gateway certificate is a user certificate whose one principal is
// PrincipalGateway and whose one critical option, OptionGateway, names the
// gateway: a ticket (three other critical options) is never a gateway
// certificate nor the reverse, a user certificate (no critical options)
// is neither, and OpenSSH refuses both anywhere else.
const (
	PrincipalGateway = "gpuaas-gateway"
	OptionGateway    = "gpuaas-gateway"
	// DefaultGatewayTTL is a gateway certificate's lifetime: sshgate
	// renews it at half-life, so an outage of controld up to half an hour
	// does not stop new shells, and a key revoked stops working within it.
	DefaultGatewayTTL = time.Hour
	// MaxGatewayTTL is the longest gateway certificate SignGateway mints
	// and VerifyGateway accepts (plus TicketSkew).
	MaxGatewayTTL = 24 * time.Hour
)

// GatewayIdentity is what a verified gateway certificate says.
type GatewayIdentity struct {
	// Name is the gateway's registered name (OptionGateway).
	Name        string    `json:"name"`
	KeyID       string    `json:"key_id"`
	Serial      uint64    `json:"serial"`
	ValidAfter  time.Time `json:"valid_after"`
	ValidBefore time.Time `json:"valid_before"`
	// CA is the SHA256 fingerprint of the CA key that signed it.
	CA string `json:"ca"`
}

// SignGateway mints a gateway certificate for pub (a registered gateway
// key) naming the gateway name, valid from now-TicketSkew to now+ttl (zero
// means DefaultGatewayTTL), with no extensions.
func (a *Authority) SignGateway(pub ssh.PublicKey, name string, ttl time.Duration, now time.Time) (*ssh.Certificate, error) {
	if err := checkSubjectKey(pub); err != nil {
		return nil, fmt.Errorf("sign gateway certificate for %q: %w", name, err)
	}
	if !validName(name) {
		return nil, fmt.Errorf("sign gateway certificate for %q: %w: not a gateway name", name, ErrInvalidRequest)
	}
	if ttl == 0 {
		ttl = DefaultGatewayTTL
	}
	if ttl < 0 || ttl > MaxGatewayTTL {
		return nil, fmt.Errorf("sign gateway certificate for %s: %w: TTL %s not in (0, %s]", name, ErrInvalidRequest, ttl, MaxGatewayTTL)
	}
	cert := &ssh.Certificate{
		Key:             pub,
		CertType:        ssh.UserCert,
		KeyId:           "gateway " + name + " " + ssh.FingerprintSHA256(pub),
		ValidPrincipals: []string{PrincipalGateway},
		Permissions:     ssh.Permissions{CriticalOptions: map[string]string{OptionGateway: name}},
	}
	if err := a.sign(cert, now.Add(-TicketSkew), now.Add(ttl), now); err != nil {
		return nil, fmt.Errorf("sign gateway certificate for %s: %w", name, err)
	}
	return cert, nil
}

// VerifyGateway checks that key is a gateway certificate from one of
// trusted (the internal CA), valid at now: a user certificate whose only
// critical option is a non-empty OptionGateway, whose only principal is
// PrincipalGateway, and whose window is no longer than
// MaxGatewayTTL+TicketSkew.
func VerifyGateway(trusted []ssh.PublicKey, key ssh.PublicKey, now time.Time) (GatewayIdentity, error) {
	cert, err := checkCert(trusted, key, ssh.UserCert, now)
	if err != nil {
		return GatewayIdentity{}, fmt.Errorf("verify gateway certificate: %w", err)
	}
	for opt := range cert.CriticalOptions {
		if opt != OptionGateway {
			return GatewayIdentity{}, fmt.Errorf("verify gateway certificate %q: %w: unknown %q", cert.KeyId, ErrCriticalOption, opt)
		}
	}
	name := cert.CriticalOptions[OptionGateway]
	if !validName(name) {
		return GatewayIdentity{}, fmt.Errorf("verify gateway certificate %q: %w: %s missing or empty", cert.KeyId, ErrCriticalOption, OptionGateway)
	}
	if !slices.Equal(cert.ValidPrincipals, []string{PrincipalGateway}) {
		return GatewayIdentity{}, fmt.Errorf("verify gateway certificate %q: %w: principals %q, want exactly [%s]",
			cert.KeyId, ErrPrincipal, cert.ValidPrincipals, PrincipalGateway)
	}
	id := GatewayIdentity{
		Name:        name,
		KeyID:       cert.KeyId,
		Serial:      cert.Serial,
		ValidAfter:  time.Unix(int64(cert.ValidAfter), 0).UTC(),
		ValidBefore: time.Unix(int64(cert.ValidBefore), 0).UTC(),
		CA:          ssh.FingerprintSHA256(cert.SignatureKey),
	}
	if window := id.ValidBefore.Sub(id.ValidAfter); window > MaxGatewayTTL+TicketSkew {
		return GatewayIdentity{}, fmt.Errorf("verify gateway certificate %q: %w: valid for %s", cert.KeyId, ErrValidity, window)
	}
	if err := recheck(cert, PrincipalGateway, []string{OptionGateway}, now); err != nil {
		return GatewayIdentity{}, fmt.Errorf("verify gateway certificate %q: %w", cert.KeyId, err)
	}
	return id, nil
}
