package sshgate

import (
	"context"
	"errors"
	"net/http"
	"net/http/cookiejar"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/gpuaas/gpuaas/gateway/httpfront"
	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/sshtest"
	"github.com/gpuaas/gpuaas/internal/testutil"
)

// replica starts another gateway of e's platform (its own identity and
// listeners) with https as its HTTPS front.
func (e *env) replica(name string, https HTTPS) *Gateway {
	e.t.Helper()
	client, key := e.ctl.Gateway(e.t, name)
	gw, err := New(Config{Listen: "127.0.0.1:0", HostKey: sshtest.NewKey(e.t), GatewayKey: key, Client: client,
		RecordingDir: e.t.TempDir(), NodeTransport: TransportSSH, HTTPS: https, Log: testutil.Logger(e.t)})
	if err != nil {
		e.t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- gw.Run(ctx) }()
	e.t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			e.t.Errorf("replica %s: Run returned %v", name, err)
		}
	})
	select {
	case <-gw.Ready():
	case err := <-done:
		e.t.Fatalf("replica %s: %v", name, err)
	case <-time.After(20 * time.Second):
		e.t.Fatalf("replica %s not ready after 20s", name)
	}
	return gw
}

func keyFile(t *testing.T, key string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "cookie.key")
	if err := os.WriteFile(p, []byte(key+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestHTTPSFrontReplicasShareCookies: a browser logged in through one
// gateway replica's one-time link is let in by another replica given the
// same --https-cookie-key-file, and sent to log in by a replica with
// another key; a gateway with a key file others can read does not start.
func TestHTTPSFrontReplicasShareCookies(t *testing.T) {
	t.Parallel()
	ca, err := httpfront.LoadOrCreateDevCA(t.TempDir(), time.Now())
	if err != nil {
		t.Fatal(err)
	}
	shared := keyFile(t, "q3J0mVbXc9Yl2p8sTzWn4eKfRaHgUo1D6iLxPvCy7MdE5tNb")
	front := func(keyFile string) HTTPS {
		return HTTPS{Listen: "127.0.0.1:0", Domain: "localhost", TLS: ca.TLSConfig("localhost", time.Now), CookieKeyFile: keyFile}
	}
	e := newEnv(t, envOptions{config: func(c *Config) { c.HTTPS = front(shared) }})
	same := e.replica("sshgate-2", front(shared))
	other := e.replica("sshgate-3", front(keyFile(t, "Zk8wQeR4tYu2IoP6aSdF0gHjKl9XcVbN3mQwErTyUiOpAs1D")))

	u := e.newUser()
	alloc := e.addAlloc(u)
	port, _ := renterServer(t)
	ctx := t.Context()
	ex, err := u.client.ExposeCreate(ctx, api.ExposeCreateRequest{Allocation: alloc, Port: int(port), Share: api.ShareMe})
	if err != nil {
		t.Fatal(err)
	}
	link, err := u.client.ExposeLink(ctx, api.ExposeLinkRequest{Host: ex.Host, Path: "/"})
	if err != nil {
		t.Fatal(err)
	}
	jar, _ := cookiejar.New(nil)
	browserAt := func(gw *Gateway) *http.Client {
		return &http.Client{Transport: frontClient(t, ca, gw.HTTPSAddr().String(), true).Transport, Jar: jar}
	}
	base := "https://" + ex.Host + ".localhost"
	if resp, body := get(t, browserAt(e.gw), base+api.LinkPath+"?code="+link.Code, ""); resp.StatusCode != http.StatusOK {
		t.Fatalf("the link at the first replica: got %s %q; want 200", resp.Status, body)
	}
	if resp, body := get(t, browserAt(same), base+"/", ""); resp.StatusCode != http.StatusOK {
		t.Fatalf("the cookie at a replica with the same key: got %s %q; want 200", resp.Status, body)
	}
	if resp, body := get(t, browserAt(other), base+"/", ""); resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("the cookie at a replica with another key: got %s %q; want 401", resp.Status, body)
	}

	open := filepath.Join(t.TempDir(), "cookie.key")
	if err := os.WriteFile(open, []byte("q3J0mVbXc9Yl2p8sTzWn4eKfRaHgUo1D6iLxPvCy7MdE5tNb"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(open, 0o644); err != nil {
		t.Fatal(err)
	}
	_, err = New(Config{Listen: "127.0.0.1:0", HostKey: sshtest.NewKey(t), GatewayKey: sshtest.NewKey(t), Client: e.client,
		RecordingDir: t.TempDir(), HTTPS: front(open), Log: testutil.Logger(t)})
	if !errors.Is(err, httpfront.ErrConfig) {
		t.Fatalf("a gateway with a 0644 cookie key file: got %v; want a config error", err)
	}
}
