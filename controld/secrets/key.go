package secrets

import (
	"bytes"
	"crypto/aes"
	"crypto/cipher"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
)

// KeySize is the size of the secrets key: 32 random bytes (AES-256).
const KeySize = 32

// ErrNoKey is returned when a secret must be sealed or opened and this
// controld was given no secrets key.
var ErrNoKey = errors.New("no secrets key")

// Key seals and opens secrets' values: AES-256-GCM under a key derived
// from the operator's key file, the project and name as associated data
// (a value copied to another row does not open), and an HMAC-SHA256 of
// the value as its digest.
type Key struct {
	id   string
	aead cipher.AEAD
	mac  []byte
}

// NewKey makes the Key of raw, which must be KeySize bytes.
func NewKey(raw []byte) (*Key, error) {
	if len(raw) != KeySize {
		return nil, fmt.Errorf("secrets key: %d bytes, want %d random bytes", len(raw), KeySize)
	}
	derive := func(label string) []byte {
		m := hmac.New(sha256.New, raw)
		m.Write([]byte("gpuaas secrets " + label))
		return m.Sum(nil)
	}
	block, err := aes.NewCipher(derive("seal"))
	if err != nil {
		return nil, fmt.Errorf("secrets key: %w", err)
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		return nil, fmt.Errorf("secrets key: %w", err)
	}
	return &Key{id: hex.EncodeToString(derive("id")[:8]), aead: aead, mac: derive("digest")}, nil
}

// ID names the key (not secret: a hash of it), stored with each value it
// seals so that a value sealed with another key is told apart.
func (k *Key) ID() string { return k.id }

// LoadKeyFile reads the secrets key from path (gpuaas controld
// --secrets-key-file): KeySize raw bytes, or their base64 or hex on one
// line. The file must not be readable by group or others (0600 or
// stricter); a shorter or longer key is refused.
func LoadKeyFile(path string) (*Key, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("secrets key: %w", err)
	}
	if fi.Mode().Perm()&0o077 != 0 {
		return nil, fmt.Errorf("secrets key %s: mode %04o lets others read it; chmod 600 it", path, fi.Mode().Perm())
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("secrets key: %w", err)
	}
	if len(b) != KeySize {
		t := bytes.TrimSpace(b)
		if d, err := base64.StdEncoding.DecodeString(string(t)); err == nil && len(d) == KeySize {
			b = d
		} else if d, err := hex.DecodeString(string(t)); err == nil && len(d) == KeySize {
			b = d
		} else {
			return nil, fmt.Errorf("secrets key %s: want %d random bytes (raw, base64 or hex), it holds %d bytes: "+
				"make one with `head -c 32 /dev/urandom > FILE; chmod 600 FILE`", path, KeySize, len(b))
		}
	}
	return NewKey(b)
}

// WriteKeyFile makes a new random key in path (0600), unless a file is
// there already; it then loads it. gpuaas dev keeps its key this way.
func WriteKeyFile(path string) (*Key, error) {
	raw := make([]byte, KeySize)
	if _, err := rand.Read(raw); err != nil {
		return nil, err
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err == nil {
		_, err = f.Write(raw)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return nil, fmt.Errorf("secrets key: write %s: %w", path, err)
		}
	} else if !errors.Is(err, os.ErrExist) {
		return nil, fmt.Errorf("secrets key: %w", err)
	}
	return LoadKeyFile(path)
}

func aad(projectID, name string) []byte { return []byte(projectID + "\x00" + name) }

// seal seals a project's named value: its nonce and ciphertext.
func (k *Key) seal(projectID, name string, value []byte) (nonce, ct []byte, err error) {
	nonce = make([]byte, k.aead.NonceSize())
	if _, err := rand.Read(nonce); err != nil {
		return nil, nil, err
	}
	return nonce, k.aead.Seal(nil, nonce, value, aad(projectID, name)), nil
}

// open opens what seal sealed for the same project and name.
func (k *Key) open(projectID, name string, nonce, ct []byte) ([]byte, error) {
	if len(nonce) != k.aead.NonceSize() {
		return nil, errors.New("bad nonce")
	}
	return k.aead.Open(nil, nonce, ct, aad(projectID, name))
}

// digest is a value's short fingerprint under the key.
func (k *Key) digest(projectID, name string, value []byte) string {
	m := hmac.New(sha256.New, k.mac)
	m.Write(aad(projectID, name))
	m.Write([]byte{0})
	m.Write(value)
	return hex.EncodeToString(m.Sum(nil)[:8])
}
