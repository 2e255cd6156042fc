package httpfront

import (
	"crypto/tls"
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gpuaas/gpuaas/gateway/core"
	"github.com/gpuaas/gpuaas/internal/gateproto"
	"github.com/gpuaas/gpuaas/internal/testutil"
)

// replica is a front as a replica starts it: its config through
// CheckAndSetDefaults, its cookie key from keyFile (none: random).
func replica(t *testing.T, keyFile string, now func() time.Time) *Server {
	t.Helper()
	cfg := Config{Core: (*core.Core)(nil), Verdicts: gateproto.Front{}, Links: gateproto.Front{},
		Domain: "apps.example.test", TLS: &tls.Config{}, Now: now}
	if keyFile != "" {
		key, err := LoadCookieKey(keyFile)
		if err != nil {
			t.Fatal(err)
		}
		cfg.CookieKey = key
	}
	if err := cfg.CheckAndSetDefaults(); err != nil {
		t.Fatal(err)
	}
	return &Server{cfg: cfg}
}

func writeKey(t *testing.T, content string, mode os.FileMode) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "cookie.key")
	if err := os.WriteFile(p, []byte(content), mode); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(p, mode); err != nil { // whatever the umask
		t.Fatal(err)
	}
	return p
}

// TestCookieKeyShared: two replicas given one key file accept each other's
// cookies; replicas with different keys, or with none (a random key per
// start), refuse them.
func TestCookieKeyShared(t *testing.T) {
	clock := testutil.NewClock(time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC))
	shared := writeKey(t, "q3J0mVbXc9Yl2p8sTzWn4eKfRaHgUo1D6iLxPvCy7MdE5tNb\n", 0o600)
	other := writeKey(t, "Zk8wQeR4tYu2IoP6aSdF0gHjKl9XcVbN3mQwErTyUiOpAs1D\n", 0o600)
	a := replica(t, shared, clock.Now)
	label := "8888-a-1"
	value := a.signCookie("s-1", "u-1", label, clock.Now().Add(time.Hour))
	cookieOn := func(s *Server) credential {
		r, _ := http.NewRequest(http.MethodGet, "https://"+label+".apps.example.test/", nil)
		r.AddCookie(&http.Cookie{Name: CookieName, Value: value})
		return s.credentialOf(r, label)
	}
	if got := cookieOn(replica(t, shared, clock.Now)); got.sessionID != "s-1" || got.userID != "u-1" {
		t.Fatalf("another replica with the same key file: got %+v; want the login s-1 of u-1", got)
	}
	for name, s := range map[string]*Server{"another key file": replica(t, other, clock.Now), "no key file": replica(t, "", clock.Now)} {
		if got := cookieOn(s); got != (credential{}) {
			t.Errorf("%s: got %+v; want no credential", name, got)
		}
	}
}

// TestLoadCookieKeyRefuses: a key file others may read, a short key or a
// visibly weak one is refused with the reason.
func TestLoadCookieKeyRefuses(t *testing.T) {
	good := "q3J0mVbXc9Yl2p8sTzWn4eKfRaHgUo1D6iLxPvCy7MdE5tNb"
	tests := []struct {
		name, content string
		mode          os.FileMode
		want          string
	}{
		{"readable by others", good, 0o644, "mode 0644"},
		{"readable by its group", good, 0o640, "mode 0640"},
		{"short", "q3J0mVbXc9Yl2p8s", 0o600, "16 bytes"},
		{"weak", strings.Repeat("password", 5), 0o600, "different bytes"},
		{"empty", "\n", 0o600, "0 bytes"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := LoadCookieKey(writeKey(t, tt.content, tt.mode))
			if !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("got %v; want a config error saying %q", err, tt.want)
			}
		})
	}
	if _, err := LoadCookieKey(filepath.Join(t.TempDir(), "missing")); err == nil {
		t.Fatal("a missing key file: got no error")
	}
	if key, err := LoadCookieKey(writeKey(t, good+"\n", 0o400)); err != nil || string(key) != good {
		t.Fatalf("a 0400 key file: got %q, %v; want the key without its newline", key, err)
	}
	cfg := Config{Core: (*core.Core)(nil), Verdicts: gateproto.Front{}, Links: gateproto.Front{},
		Domain: "apps.example.test", TLS: &tls.Config{}, CookieKey: []byte("short")}
	if err := cfg.CheckAndSetDefaults(); !errors.Is(err, ErrConfig) {
		t.Fatalf("a short CookieKey in Config: got %v; want a config error", err)
	}
}
