package e2e

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/testidp"
)

// TestDevOIDCDeviceLogin: `gpuaas dev --oidc-issuer` trusts a test IdP, and
// the gpuaas binary logs in through the device flow: it prints the code,
// the person approves it at the IdP, and the session works. A refused
// approval exits unauthenticated with the IdP's reason.
func TestDevOIDCDeviceLogin(t *testing.T) {
	idp := testidp.New(t, testidp.Options{})
	data, cfg := tempDir(t, "gpuaas-e2e-data-"), tempDir(t, "gpuaas-e2e-cfg-")
	dev := startDev(t, data, cfg, "--oidc-issuer", idp.URL, "--oidc-client-id", idp.ClientID)

	approve := func(settle func(code string) error) <-chan string {
		codes := make(chan string, 1)
		go func() {
			defer close(codes)
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			code, err := idp.NextDeviceCode(ctx)
			if err != nil {
				t.Error(err)
				return
			}
			if err := settle(code); err != nil {
				t.Error(err)
			}
			codes <- code
		}()
		return codes
	}

	codes := approve(func(c string) error { return idp.Approve(c, "grace") })
	r := dev.gpuaas(t, "", "login")
	code := <-codes
	if r.code != 0 || !strings.Contains(r.stderr, "one-time code: "+code) || r.stdout != "" {
		t.Fatalf("login: exit %d, stdout %q, stderr %q; want success with the code %s on stderr", r.code, r.stdout, r.stderr, code)
	}
	r = dev.gpuaas(t, "", "whoami", "--json")
	var who api.WhoamiResponse
	if err := json.Unmarshal([]byte(r.stdout), &who); err != nil || r.code != 0 {
		t.Fatalf("whoami --json: exit %d, %v: %q %s", r.code, err, r.stdout, r.stderr)
	}
	if who.User.Email != "grace@"+testidp.EmailDomain || who.User.Provider != "oidc" {
		t.Fatalf("whoami got %+v; want the oidc user grace", who.User)
	}

	approve(idp.Deny)
	r = dev.gpuaas(t, "", "login")
	if r.code != 4 || !strings.Contains(r.stderr, "error: login failed: the identity provider denied the request") {
		t.Fatalf("denied login: exit %d, stderr %q; want exit 4 saying the IdP denied it", r.code, r.stderr)
	}
}
