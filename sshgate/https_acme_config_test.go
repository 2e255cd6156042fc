package sshgate

import (
	"errors"
	"strings"
	"testing"

	"github.com/gpuaas/gpuaas/gateway/httpfront"
)

// TestHTTPSACMEConfig: ACME is an alternative to a certificate file, from
// an https directory, with a storage directory; anything else is refused
// with the reason before the gateway starts.
func TestHTTPSACMEConfig(t *testing.T) {
	acme := httpfront.ACMEConfig{CA: "https://acme.example.test/dir", Dir: t.TempDir()}
	tests := []struct {
		name string
		h    HTTPS
		want string // "" when accepted
	}{
		{"acme", HTTPS{Listen: ":443", Domain: "apps.example.test", ACME: acme}, ""},
		{"acme and a certificate", HTTPS{Listen: ":443", Domain: "apps.example.test", ACME: acme, CertFile: "/c.pem", KeyFile: "/k.pem"}, "not both"},
		{"acme over http", HTTPS{Listen: ":443", Domain: "apps.example.test", ACME: httpfront.ACMEConfig{CA: "http://acme.example.test/dir", Dir: "/d"}}, "not an https URL"},
		{"acme without storage", HTTPS{Listen: ":443", Domain: "apps.example.test", ACME: httpfront.ACMEConfig{CA: "https://acme.example.test/dir"}}, "storage directory"},
		{"neither", HTTPS{Listen: ":443", Domain: "apps.example.test"}, "CertFile and KeyFile"},
		{"a missing cookie key file", HTTPS{Listen: ":443", Domain: "apps.example.test", ACME: acme, CookieKeyFile: "/nonexistent/cookie.key"}, "cookie key"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.h.checkAndSetDefaults()
			switch {
			case tt.want == "" && err != nil:
				t.Fatalf("got %v; want accepted", err)
			case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
				t.Fatalf("got %v; want an error saying %q", err, tt.want)
			case tt.want != "" && !errors.Is(err, ErrConfig) && !strings.Contains(tt.name, "missing"):
				t.Fatalf("got %v; want a config error", err)
			}
		})
	}
}
