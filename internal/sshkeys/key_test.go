package sshkeys

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"golang.org/x/crypto/ssh"
)

func TestDirName(t *testing.T) {
	tests := []struct {
		name string
		want string
	}{
		{"dev", "dev"},
		{"prod-eu_1.b", "prod-eu_1.b"},
		{"../etc", "+2e.+2fetc"},
		{"..", "+2e."},
		{".hidden", "+2ehidden"},
		{"a b", "a+20b"},
		{"a+20b", "a+2b20b"},
		{"", "+"},
	}
	for _, tt := range tests {
		if got := DirName(tt.name); got != tt.want {
			t.Errorf("DirName(%q): got %q; want %q", tt.name, got, tt.want)
		}
	}
	if got := For("/cfg", "../x").Dir; filepath.Dir(got) != "/cfg/ssh" {
		t.Errorf("got dir %q; want it inside /cfg/ssh", got)
	}
}

func mode(t *testing.T, path string) os.FileMode {
	t.Helper()
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return st.Mode().Perm()
}

func TestEnsureKeyCreatesThenReuses(t *testing.T) {
	p := For(t.TempDir(), "dev")
	key, created, err := EnsureKey(p, "gpuaas:dev")
	if err != nil || !created {
		t.Fatalf("got created %v, %v; want a new key", created, err)
	}
	if got := mode(t, p.Dir); got != 0o700 {
		t.Errorf("got dir mode %o; want 700", got)
	}
	if got := mode(t, p.Key); got != 0o600 {
		t.Errorf("got key mode %o; want 600", got)
	}
	// OpenSSH must read it: an unencrypted OpenSSH ed25519 key.
	pemBytes, _ := os.ReadFile(p.Key)
	signer, err := ssh.ParsePrivateKey(pemBytes)
	if err != nil {
		t.Fatalf("key does not parse: %v", err)
	}
	pubLine, _ := os.ReadFile(p.PublicKey)
	if !bytes.HasPrefix(pubLine, bytes.TrimSpace(ssh.MarshalAuthorizedKey(signer.PublicKey()))) || !strings.HasSuffix(string(pubLine), " gpuaas:dev\n") {
		t.Errorf("got public key file %q; want the key's public half with its comment", pubLine)
	}

	again, created, err := EnsureKey(p, "gpuaas:dev")
	if err != nil || created {
		t.Fatalf("got created %v, %v; want the existing key", created, err)
	}
	if !again.Equal(key) {
		t.Error("got another key; want the same one reused")
	}
}

func TestEnsureKeyNeverOverwrites(t *testing.T) {
	p := For(t.TempDir(), "dev")
	if err := os.MkdirAll(p.Dir, 0o700); err != nil {
		t.Fatal(err)
	}
	junk := []byte("not a key\n")
	if err := os.WriteFile(p.Key, junk, 0o600); err != nil {
		t.Fatal(err)
	}
	_, _, err := EnsureKey(p, "gpuaas:dev")
	if !errors.Is(err, ErrBadKey) || !strings.Contains(err.Error(), p.Key) {
		t.Fatalf("got %v; want ErrBadKey naming the file", err)
	}
	if got, _ := os.ReadFile(p.Key); !bytes.Equal(got, junk) {
		t.Errorf("key file was changed to %q", got)
	}
}

func TestEnsureKeyTightensMode(t *testing.T) {
	p := For(t.TempDir(), "dev")
	if _, _, err := EnsureKey(p, ""); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(p.Key, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, _, err := EnsureKey(p, ""); err != nil {
		t.Fatal(err)
	}
	if got := mode(t, p.Key); got != 0o600 {
		t.Errorf("got key mode %o; want 600", got)
	}
}

func TestEnsureKeyConcurrentCallersShareOneKey(t *testing.T) {
	p := For(t.TempDir(), "dev")
	const n = 8
	keys := make([][]byte, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			key, _, err := EnsureKey(p, "")
			if err != nil {
				t.Error(err)
				return
			}
			keys[i] = key
		})
	}
	wg.Wait()
	for i := 1; i < n; i++ {
		if !bytes.Equal(keys[i], keys[0]) {
			t.Fatalf("caller %d got another key than caller 0", i)
		}
	}
	entries, _ := os.ReadDir(p.Dir)
	for _, e := range entries {
		if strings.Contains(e.Name(), ".tmp-") {
			t.Errorf("temporary file %s left behind", e.Name())
		}
	}
}
