package term

import (
	"crypto/ed25519"
	"crypto/rand"
	"encoding/pem"
	"errors"
	"fmt"
	"os"

	gossh "golang.org/x/crypto/ssh"

	"github.com/gpuaas/gpuaas/internal/fsutil"
)

// loadOrMakeKey reads an ed25519 key in OpenSSH PEM form, making it (0600)
// on first use so the terminal keeps its host key across restarts.
func loadOrMakeKey(path string) (ed25519.PrivateKey, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		_, priv, err := ed25519.GenerateKey(rand.Reader)
		if err != nil {
			return nil, err
		}
		block, err := gossh.MarshalPrivateKey(priv, "gpuaas hostd terminal")
		if err != nil {
			return nil, err
		}
		b = pem.EncodeToMemory(block)
		if err := fsutil.WriteFile(path, b, 0o600, fsutil.Synced); err != nil {
			return nil, err
		}
	} else if err != nil {
		return nil, err
	}
	k, err := gossh.ParseRawPrivateKey(b)
	if err != nil {
		return nil, err
	}
	switch k := k.(type) {
	case *ed25519.PrivateKey:
		return *k, nil
	case ed25519.PrivateKey:
		return k, nil
	}
	return nil, fmt.Errorf("%s: a %T, not an ed25519 key", path, k)
}
