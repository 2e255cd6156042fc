package ca

import (
	"bytes"
	"crypto/aes"
	"crypto/cipher"
	"crypto/ed25519"
	"crypto/rand"
	"errors"
	"fmt"

	"github.com/gpuaas/gpuaas/internal/sshcert"
)

// KEKSize is the size of a key-encryption key: AES-256.
const KEKSize = 32

// sealedPrefix starts a private key sealed with the KEK; an unsealed one is
// an OpenSSH PEM block ("-----BEGIN").
var sealedPrefix = []byte("gpuaas-kek-v1:")

// seal encrypts a PEM block with the KEK (AES-256-GCM), binding it to the
// key's id so a sealed key copied to another row does not open.
func seal(kek []byte, id string, pemBytes []byte) ([]byte, error) {
	if len(kek) == 0 {
		return pemBytes, nil
	}
	aead, err := newAEAD(kek)
	if err != nil {
		return nil, err
	}
	nonce := make([]byte, aead.NonceSize())
	if _, err := rand.Read(nonce); err != nil {
		return nil, fmt.Errorf("seal CA key: %w", err)
	}
	out := append(append([]byte(nil), sealedPrefix...), nonce...)
	return aead.Seal(out, nonce, pemBytes, []byte(id)), nil
}

// open reverses seal; an unsealed key passes through (reported by sealed).
func open(kek []byte, id string, stored []byte) (pemBytes []byte, sealed bool, err error) {
	rest, ok := bytes.CutPrefix(stored, sealedPrefix)
	if !ok {
		return stored, false, nil
	}
	if len(kek) == 0 {
		return nil, true, fmt.Errorf("CA key %s is encrypted: controld needs the CA key-encryption key", id)
	}
	aead, err := newAEAD(kek)
	if err != nil {
		return nil, true, err
	}
	if len(rest) < aead.NonceSize() {
		return nil, true, fmt.Errorf("CA key %s: sealed key is truncated", id)
	}
	plain, err := aead.Open(nil, rest[:aead.NonceSize()], rest[aead.NonceSize():], []byte(id))
	if err != nil {
		return nil, true, fmt.Errorf("CA key %s does not open with this key-encryption key", id)
	}
	return plain, true, nil
}

func newAEAD(kek []byte) (cipher.AEAD, error) {
	if len(kek) != KEKSize {
		return nil, fmt.Errorf("CA key-encryption key has %d bytes; want %d", len(kek), KEKSize)
	}
	block, err := aes.NewCipher(kek)
	if err != nil {
		return nil, err
	}
	return cipher.NewGCM(block)
}

func (s *Service) parsePrivate(id string, stored []byte) (ed25519.PrivateKey, error) {
	pemBytes, sealed, err := open(s.cfg.KEK, id, stored)
	if err != nil {
		return nil, err
	}
	if !sealed && len(s.cfg.KEK) > 0 {
		s.cfg.Log.Warn("SSH CA key is stored without encryption; rotate the CA to replace it", "key", id)
	}
	k, err := sshcert.ParsePrivateKey(pemBytes, nil)
	if err != nil {
		return nil, fmt.Errorf("CA key %s: %w", id, err)
	}
	return k, nil
}

var errKEKSize = errors.New("ca: KEK must be 32 bytes (AES-256)")
