// Package nodeseal seals small values to one node: only the hostd holding
// the node's Ed25519 key (its enrollment identity) can open them. controld
// seals a job's secret environment with it, so the value is ciphertext in
// node_tasks, on the bus and anywhere a task's params are kept
// (docs/decisions/0028-project-secrets.md).
//
// The node's Ed25519 key is used as the X25519 key of the same point
// (RFC 7748's birational map, as libsodium's
// crypto_sign_ed25519_pk_to_curve25519 does, through
// filippo.io/edwards25519), and values are sealed with
// NaCl's anonymous box (an ephemeral sender key, X25519 + XSalsa20-Poly1305).
package nodeseal

import (
	"crypto/ecdh"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/sha512"
	"errors"
	"fmt"

	"filippo.io/edwards25519"
	"golang.org/x/crypto/nacl/box"
)

// ErrOpen is returned for a sealed value this key cannot open.
var ErrOpen = errors.New("nodeseal: cannot open: sealed to another node or damaged")

// curvePublic is the X25519 public key of an Ed25519 public key: the
// Montgomery u-coordinate of the same point, u = (1 + y) / (1 - y).
// filippo.io/edwards25519 decodes the point (refusing what is not one) and
// maps it.
func curvePublic(pub ed25519.PublicKey) (*[32]byte, error) {
	if len(pub) != ed25519.PublicKeySize {
		return nil, fmt.Errorf("nodeseal: public key of %d bytes, want %d", len(pub), ed25519.PublicKeySize)
	}
	pt, err := new(edwards25519.Point).SetBytes(pub)
	if err != nil {
		return nil, fmt.Errorf("nodeseal: not an Ed25519 public key: %w", err)
	}
	if pt.Equal(edwards25519.NewIdentityPoint()) == 1 {
		return nil, errors.New("nodeseal: not an Ed25519 public key (identity point)")
	}
	var out [32]byte
	copy(out[:], pt.BytesMontgomery())
	return &out, nil
}

// curvePrivate is the X25519 private key of an Ed25519 seed: the clamped
// first half of SHA-512(seed), the scalar Ed25519 signs with.
func curvePrivate(seed []byte) (*[32]byte, error) {
	if len(seed) != ed25519.SeedSize {
		return nil, fmt.Errorf("nodeseal: seed of %d bytes, want %d", len(seed), ed25519.SeedSize)
	}
	h := sha512.Sum512(seed)
	var k [32]byte
	copy(k[:], h[:32])
	k[0] &= 248
	k[31] &= 127
	k[31] |= 64
	return &k, nil
}

// Seal seals msg to the node whose Ed25519 public key is pub.
func Seal(pub ed25519.PublicKey, msg []byte) ([]byte, error) {
	cp, err := curvePublic(pub)
	if err != nil {
		return nil, err
	}
	out, err := box.SealAnonymous(nil, msg, cp, rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("nodeseal: seal: %w", err)
	}
	return out, nil
}

// Opener opens what was sealed to the node whose Ed25519 seed is seed.
type Opener struct {
	pub, priv *[32]byte
}

// NewOpener is the opener of the node with this Ed25519 seed.
func NewOpener(seed []byte) (*Opener, error) {
	priv, err := curvePrivate(seed)
	if err != nil {
		return nil, err
	}
	k, err := ecdh.X25519().NewPrivateKey(priv[:])
	if err != nil {
		return nil, fmt.Errorf("nodeseal: %w", err)
	}
	var pub [32]byte
	copy(pub[:], k.PublicKey().Bytes())
	return &Opener{pub: &pub, priv: priv}, nil
}

// Open opens a sealed value.
func (o *Opener) Open(sealed []byte) ([]byte, error) {
	out, ok := box.OpenAnonymous(nil, sealed, o.pub, o.priv)
	if !ok {
		return nil, ErrOpen
	}
	return out, nil
}
