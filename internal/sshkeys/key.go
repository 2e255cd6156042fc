package sshkeys

import (
	"bytes"
	"crypto/ed25519"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"golang.org/x/crypto/ssh"

	"github.com/gpuaas/gpuaas/internal/sshcert"
)

// EnsureKey returns the context's private key, generating it (0600, in a
// 0700 directory) when the key file does not exist. An existing key is
// never overwritten: one that cannot be read is an error naming the file.
// comment is stored in a new key and its .pub file (e.g. "gpuaas:dev").
func EnsureKey(p Paths, comment string) (key ed25519.PrivateKey, created bool, err error) {
	if err := os.MkdirAll(p.Dir, 0o700); err != nil {
		return nil, false, fmt.Errorf("create ssh directory: %w", err)
	}
	key, err = readKey(p.Key)
	if errors.Is(err, fs.ErrNotExist) {
		key, created, err = createKey(p.Key, comment)
	}
	if err != nil {
		return nil, false, err
	}
	if err := writePublicKey(p.PublicKey, key, comment); err != nil {
		return nil, false, err
	}
	return key, created, nil
}

// readKey loads an existing key and tightens its mode to 0600 if needed:
// OpenSSH refuses private keys others can read.
func readKey(path string) (ed25519.PrivateKey, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err // fs.ErrNotExist is how EnsureKey knows to create one
	}
	key, err := sshcert.ParsePrivateKey(b, nil)
	if err != nil {
		return nil, fmt.Errorf("%w %s: %v (gpuaas never replaces a key; move it away to get a new one)", ErrBadKey, path, err)
	}
	if st, err := os.Stat(path); err == nil && st.Mode().Perm()&0o077 != 0 {
		if err := os.Chmod(path, 0o600); err != nil {
			return nil, fmt.Errorf("restrict ssh key mode: %w", err)
		}
	}
	return key, nil
}

// createKey writes a new key without ever replacing one: the key goes to
// a private temporary file that is then hard-linked to path, which fails if
// another gpuaas got there first; that key is then used instead.
func createKey(path, comment string) (ed25519.PrivateKey, bool, error) {
	key, err := sshcert.GenerateKey()
	if err != nil {
		return nil, false, err
	}
	pemBytes, err := sshcert.MarshalPrivateKey(key, comment, nil)
	if err != nil {
		return nil, false, err
	}
	tmp, err := writeTemp(filepath.Dir(path), ".id_ed25519.tmp-*", pemBytes, 0o600)
	if err != nil {
		return nil, false, fmt.Errorf("write ssh key: %w", err)
	}
	defer os.Remove(tmp)
	if err := os.Link(tmp, path); err != nil {
		if errors.Is(err, fs.ErrExist) {
			key, err := readKey(path)
			return key, false, err
		}
		return nil, false, fmt.Errorf("write ssh key: %w", err)
	}
	return key, true, nil
}

func writePublicKey(path string, key ed25519.PrivateKey, comment string) error {
	pub, err := ssh.NewPublicKey(key.Public())
	if err != nil {
		return fmt.Errorf("ssh public key: %w", err)
	}
	line := bytes.TrimSpace(ssh.MarshalAuthorizedKey(pub))
	if comment != "" {
		line = append(append(line, ' '), comment...)
	}
	line = append(line, '\n')
	if old, err := os.ReadFile(path); err == nil && bytes.Equal(old, line) {
		return nil
	}
	if err := WriteFile(path, line, 0o644); err != nil {
		return fmt.Errorf("write ssh public key: %w", err)
	}
	return nil
}

// WriteFile replaces path atomically with data: a temporary file in the
// same directory, synced, given mode perm, renamed over path.
func WriteFile(path string, data []byte, perm fs.FileMode) error {
	tmp, err := writeTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp-*", data, perm)
	if err != nil {
		return err
	}
	if err := os.Rename(tmp, path); err != nil {
		os.Remove(tmp)
		return err
	}
	return nil
}

func writeTemp(dir, pattern string, data []byte, perm fs.FileMode) (string, error) {
	f, err := os.CreateTemp(dir, pattern) // created 0600
	if err != nil {
		return "", err
	}
	name := f.Name()
	fail := func(err error) (string, error) {
		f.Close()
		os.Remove(name)
		return "", err
	}
	if _, err := f.Write(data); err != nil {
		return fail(err)
	}
	if err := f.Chmod(perm); err != nil {
		return fail(err)
	}
	if err := f.Sync(); err != nil {
		return fail(err)
	}
	if err := f.Close(); err != nil {
		os.Remove(name)
		return "", err
	}
	return name, nil
}
