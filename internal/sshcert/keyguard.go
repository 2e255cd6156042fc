package sshcert

import (
	"encoding/json"
	"fmt"

	"golang.org/x/crypto/ssh"
)

// Key confusion (CVE-2024-45337). An SSH client may ask whether a key is
// acceptable without proving it holds the private half, so
// ServerConfig.PublicKeyCallback runs for keys that never authenticate: a
// client can offer Bob's certificate (public, often copied around), see it
// accepted, then authenticate with its own. A server that records "the
// identity of the last (or first) key the callback accepted" can end up
// serving Bob. x/crypto ≥ v0.31 re-runs the callback for the key that signs,
// which saves the last-wins pattern for public-key-only servers, but not
// first-wins recorders, not servers where another method (keyboard-
// interactive, a guest "none") can succeed after a key was offered, and not
// libraries that share one Permissions value across attempts (gliderlabs/ssh,
// hence wish).
//
// The guard: the identity travels in the Permissions returned for the key it
// was verified from, tagged with that key's fingerprint; it counts only once
// the same key has proved possession (VerifiedPublicKeyCallback runs after
// the signature check and is given the key that signed). After the handshake
// the server reads the identity with VerifiedFrom and nothing else.
//
// With x/crypto: GuardServerConfig(cfg, accept), then
// VerifiedFrom(serverConn.Permissions). With gliderlabs/ssh or wish: in the
// PublicKeyHandler, VerifiedUser(key, id).Store(ctx.Permissions().Permissions);
// in ServerConfigCallback, set VerifiedPublicKeyCallback to call ConfirmKey;
// in the session, VerifiedFrom(ctx.Permissions().Permissions).

// Names of the Permissions.Extensions entries the guard owns. No certificate
// gpuaas mints carries them, and the guard never copies certificate
// extensions into Permissions.Extensions.
const (
	PermVerified  = "gpuaas-verified@gpuaas"
	PermConfirmed = "gpuaas-key-confirmed@gpuaas"
)

// Verified is an identity checked from one key, bound to it by Fingerprint
// (SHA256 of the key's wire form; for a certificate, of the whole
// certificate). Exactly one of User and Ticket is set.
type Verified struct {
	Fingerprint string    `json:"fingerprint"`
	User        *Identity `json:"user,omitempty"`
	Ticket      *Ticket   `json:"ticket,omitempty"`
}

// VerifiedUser binds a user identity to the key it was verified from.
func VerifiedUser(key ssh.PublicKey, id Identity) Verified {
	return Verified{Fingerprint: fingerprint(key), User: &id}
}

// VerifiedTicket binds a ticket to the key it was verified from.
func VerifiedTicket(key ssh.PublicKey, t Ticket) Verified {
	return Verified{Fingerprint: fingerprint(key), Ticket: &t}
}

// Permissions returns fresh Permissions carrying v and no confirmation: what
// a PublicKeyCallback returns.
func (v Verified) Permissions() *ssh.Permissions {
	perms := &ssh.Permissions{Extensions: map[string]string{}}
	v.Store(perms)
	return perms
}

// Store writes v into perms, replacing any identity stored before and
// dropping its confirmation: for libraries that hand every attempt the same
// Permissions value.
func (v Verified) Store(perms *ssh.Permissions) {
	if perms.Extensions == nil {
		perms.Extensions = map[string]string{}
	}
	delete(perms.Extensions, PermConfirmed)
	blob, err := json.Marshal(v)
	if err != nil {
		// Cannot happen for these types; an empty entry verifies nothing.
		blob = nil
	}
	perms.Extensions[PermVerified] = string(blob)
}

// FingerprintMatches reports whether perms carry an identity verified from
// authenticatedKey itself (the exact certificate, not another certificate of
// the same key).
func FingerprintMatches(perms *ssh.Permissions, authenticatedKey ssh.PublicKey) bool {
	v, ok := storedVerified(perms)
	return ok && authenticatedKey != nil && v.Fingerprint == fingerprint(authenticatedKey)
}

// ConfirmKey marks the identity in perms as proven by authenticatedKey, or
// refuses when it was verified from another key. Call it from
// VerifiedPublicKeyCallback, whose key is the one that signed, and last
// (after any other check that may refuse).
func ConfirmKey(perms *ssh.Permissions, authenticatedKey ssh.PublicKey) error {
	if !FingerprintMatches(perms, authenticatedKey) {
		return fmt.Errorf("confirm key %s: %w", fingerprint(authenticatedKey), ErrUnverifiedKey)
	}
	perms.Extensions[PermConfirmed] = fingerprint(authenticatedKey)
	return nil
}

// VerifiedFrom returns the identity in an established connection's
// Permissions, only if the key it was verified from is the one that
// authenticated. Anything else — no identity, an identity whose key was only
// offered, a connection authenticated by another method — is
// ErrUnverifiedKey: close the connection.
func VerifiedFrom(perms *ssh.Permissions) (Verified, error) {
	v, ok := storedVerified(perms)
	if !ok {
		return Verified{}, fmt.Errorf("identity of connection: %w: none recorded", ErrUnverifiedKey)
	}
	if perms.Extensions[PermConfirmed] != v.Fingerprint {
		return Verified{}, fmt.Errorf("identity of connection: %w: key %s never proved", ErrUnverifiedKey, v.Fingerprint)
	}
	return v, nil
}

// GuardServerConfig wires accept into cfg the guarded way: accept verifies a
// key offered for conn (VerifyUser or VerifyTicket, plus whatever else the
// server checks) and returns the identity from VerifiedUser or
// VerifiedTicket for that key; cfg then confirms the identity only for the
// key that signs. A VerifiedPublicKeyCallback already in cfg runs first and
// must keep the Permissions' extensions. Read the identity after the
// handshake with VerifiedFrom(serverConn.Permissions).
func GuardServerConfig(cfg *ssh.ServerConfig, accept func(conn ssh.ConnMetadata, key ssh.PublicKey) (Verified, error)) {
	cfg.PublicKeyCallback = func(conn ssh.ConnMetadata, key ssh.PublicKey) (*ssh.Permissions, error) {
		v, err := accept(conn, key)
		if err != nil {
			return nil, err
		}
		if v.Fingerprint != fingerprint(key) || (v.User == nil) == (v.Ticket == nil) {
			return nil, fmt.Errorf("accept key %s: %w: accept returned an identity for another key", fingerprint(key), ErrUnverifiedKey)
		}
		return v.Permissions(), nil
	}
	previous := cfg.VerifiedPublicKeyCallback
	cfg.VerifiedPublicKeyCallback = func(conn ssh.ConnMetadata, key ssh.PublicKey, perms *ssh.Permissions, algo string) (*ssh.Permissions, error) {
		if previous != nil {
			var err error
			if perms, err = previous(conn, key, perms, algo); err != nil {
				return nil, err
			}
		}
		if err := ConfirmKey(perms, key); err != nil {
			return nil, err
		}
		return perms, nil
	}
}

func storedVerified(perms *ssh.Permissions) (Verified, bool) {
	if perms == nil {
		return Verified{}, false
	}
	blob, ok := perms.Extensions[PermVerified]
	if !ok {
		return Verified{}, false
	}
	var v Verified
	if err := json.Unmarshal([]byte(blob), &v); err != nil || v.Fingerprint == "" || (v.User == nil) == (v.Ticket == nil) {
		return Verified{}, false
	}
	return v, true
}

func fingerprint(key ssh.PublicKey) string {
	if key == nil {
		return ""
	}
	return ssh.FingerprintSHA256(key)
}
