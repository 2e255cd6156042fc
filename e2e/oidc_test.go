package e2e

import (
	"context"
	"encoding/json"
	"net"
	"strconv"
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

// TestDevRestartContextListAndWhoamiAgree: a person logs in through the
// IdP for the first time and `gpuaas dev` restarts (same data, same NATS
// port). The dev context used to say admin@localhost while its token
// stayed the person's; `context list` and `whoami` now name the same
// user. Before and after, the person's commands in the context's default
// project say they have no project yet and who can add them.
func TestDevRestartContextListAndWhoamiAgree(t *testing.T) {
	idp := testidp.New(t, testidp.Options{})
	data, cfg := tempDir(t, "gpuaas-e2e-data-"), tempDir(t, "gpuaas-e2e-cfg-")
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := strconv.Itoa(l.Addr().(*net.TCPAddr).Port)
	l.Close()
	args := []string{"--nats-port", port, "--oidc-issuer", idp.URL, "--oidc-client-id", idp.ClientID}
	dev := startDev(t, data, cfg, args...)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		code, err := idp.NextDeviceCode(ctx)
		if err == nil {
			err = idp.Approve(code, "hana")
		}
		if err != nil {
			t.Error(err)
		}
	}()
	if r := dev.gpuaas(t, "", "login"); r.code != 0 {
		t.Fatalf("login: exit %d %s", r.code, r.stderr)
	}
	email := "hana@" + testidp.EmailDomain
	noProject := func(when string) {
		r := dev.gpuaas(t, "", "project", "members")
		// The dev context pins no project (the server keeps defaults), so
		// this is "no project given" (invalid_argument, exit 7).
		for _, want := range []string{`error: no project given, and you (` + email + `) are not a member of any project yet`,
			"hint: a project's owner, or a platform admin, can add you: `gpuaas project add-member PROJECT --email " + email + "`"} {
			if r.code != 7 || !strings.Contains(r.stderr, want) {
				t.Errorf("%s: project members: exit %d, stderr %q; want exit 7 saying %q", when, r.code, r.stderr, want)
			}
		}
	}
	noProject("before the restart")
	dev.stop(t)
	dev = startDev(t, data, cfg, args...)

	r := dev.gpuaas(t, "", "whoami", "--json")
	var who api.WhoamiResponse
	if err := json.Unmarshal([]byte(r.stdout), &who); err != nil || r.code != 0 {
		t.Fatalf("whoami --json after the restart: exit %d, %v: %q %s", r.code, err, r.stdout, r.stderr)
	}
	r = dev.gpuaas(t, "", "context", "list", "--json", "name,user")
	var contexts []struct{ Name, User string }
	if err := json.Unmarshal([]byte(r.stdout), &contexts); err != nil || r.code != 0 {
		t.Fatalf("context list --json after the restart: exit %d, %v: %q %s", r.code, err, r.stdout, r.stderr)
	}
	if len(contexts) != 1 || contexts[0].Name != "dev" || contexts[0].User != who.User.Email || who.User.Email != email {
		t.Fatalf("after the restart context list says %+v and whoami %s; want both to say %s", contexts, who.User.Email, email)
	}
	noProject("after the restart")
}
