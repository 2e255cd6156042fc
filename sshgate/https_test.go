package sshgate

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/cookiejar"
	"strings"
	"testing"
	"time"

	"github.com/gpuaas/gpuaas/gateway/httpfront"
	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/testutil"
)

// renterServer is the HTTP server a renter runs in an allocation: a page
// that says whether a platform credential reached it, a server-sent event
// stream that sends its second event only once the client has the first
// (so a buffering proxy deadlocks it), and an upgrade to an echo protocol
// (what a WebSocket is on the wire).
func renterServer(t *testing.T) (port uint16, gotFirst chan struct{}) {
	t.Helper()
	gotFirst = make(chan struct{}, 1)
	mux := http.NewServeMux()
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		_, hasCookie := r.Header["Cookie"]
		fmt.Fprintf(w, "hello %s auth=%q cookie=%v", r.URL.Path, r.Header.Get("Authorization"), hasCookie)
	})
	mux.HandleFunc("/events", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		fmt.Fprint(w, "data: one\n\n")
		w.(http.Flusher).Flush()
		select {
		case <-gotFirst:
		case <-r.Context().Done():
			return
		}
		fmt.Fprint(w, "data: two\n\n")
	})
	mux.HandleFunc("/ws", func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Upgrade") != "echo" {
			http.Error(w, "upgrade: echo", http.StatusBadRequest)
			return
		}
		conn, rw, err := http.NewResponseController(w).Hijack()
		if err != nil {
			return
		}
		defer conn.Close()
		fmt.Fprint(rw, "HTTP/1.1 101 Switching Protocols\r\nUpgrade: echo\r\nConnection: Upgrade\r\n\r\n")
		rw.Flush()
		_, _ = io.Copy(conn, rw)
	})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: mux}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { srv.Close() })
	return uint16(ln.Addr().(*net.TCPAddr).Port), gotFirst
}

// frontClient is a browser-like client of the front: it trusts the dev CA
// and reaches every *.localhost name at the front's address.
func frontClient(t testing.TB, ca *httpfront.DevCA, addr string, h2 bool) *http.Client {
	t.Helper()
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(ca.CertPEM) {
		t.Fatal("dev CA PEM")
	}
	tr := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool},
		DialContext: func(ctx context.Context, network, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, network, addr)
		}, ForceAttemptHTTP2: h2}
	if !h2 {
		tr.TLSNextProto = map[string]func(string, *tls.Conn) http.RoundTripper{}
	}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr, Timeout: 30 * time.Second}
}

func get(t *testing.T, c *http.Client, url, bearer string) (*http.Response, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	if bearer != "" {
		req.Header.Set("Authorization", "Bearer "+bearer)
	}
	req.AddCookie(&http.Cookie{Name: "renter", Value: "theirs"})
	resp, err := c.Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp, string(body)
}

// TestHTTPSFront: an exposure served over real TLS with the dev CA,
// through a real core and node link: HTTP/2 from the client, the
// platform's credential kept from the renter's server, 401/403/404 for
// the wrong caller or name, a server-sent event stream unbuffered, an
// upgraded connection echoing, the exposure's metrics counting, and 410
// once it is removed.
func TestHTTPSFront(t *testing.T) {
	t.Parallel()
	ca, err := httpfront.LoadOrCreateDevCA(t.TempDir(), time.Now())
	if err != nil {
		t.Fatal(err)
	}
	e := newEnv(t, envOptions{config: func(c *Config) {
		c.HTTPS = HTTPS{Listen: "127.0.0.1:0", Domain: "localhost", TLS: ca.TLSConfig("localhost", time.Now)}
	}})
	u, other := e.newUser(), e.newUser()
	alloc := e.addAlloc(u)
	port, gotFirst := renterServer(t)
	ctx := t.Context()
	ex, err := u.client.ExposeCreate(ctx, api.ExposeCreateRequest{Allocation: alloc, Port: int(port), Share: api.ShareMe})
	if err != nil {
		t.Fatal(err)
	}
	base := "https://" + ex.Host + ".localhost"
	addr := e.gw.HTTPSAddr().String()
	h2, h1 := frontClient(t, ca, addr, true), frontClient(t, ca, addr, false)

	resp, body := get(t, h2, base+"/notebook", u.token)
	if resp.StatusCode != http.StatusOK || body != `hello /notebook auth="" cookie=true` || resp.ProtoMajor != 2 {
		t.Fatalf("owner: got %s %s %q; want 200 over HTTP/2 with the renter's cookie and no Authorization", resp.Proto, resp.Status, body)
	}
	for _, tt := range []struct {
		name, url, bearer string
		want              int
	}{
		{"another user", base + "/", other.token, http.StatusForbidden},
		{"no login", base + "/", "", http.StatusUnauthorized},
		{"a port not exposed", "https://" + api.ExposureHost(alloc, 1999) + ".localhost/", u.token, http.StatusNotFound},
		{"not an exposure name", "https://localhost/", u.token, http.StatusNotFound},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if resp, body := get(t, h2, tt.url, tt.bearer); resp.StatusCode != tt.want || !strings.Contains(body, "<h1>") {
				t.Fatalf("got %s %q; want %d with a page", resp.Status, body, tt.want)
			}
		})
	}

	t.Run("server-sent events unbuffered", func(t *testing.T) {
		req, _ := http.NewRequest(http.MethodGet, base+"/events", nil)
		req.Header.Set("Authorization", "Bearer "+u.token)
		resp, err := h2.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		r := bufio.NewReader(resp.Body)
		if line, err := r.ReadString('\n'); err != nil || line != "data: one\n" {
			t.Fatalf("first event: got %q, %v", line, err)
		}
		gotFirst <- struct{}{} // only now does the server send the second
		_, _ = r.ReadString('\n')
		if line, err := r.ReadString('\n'); err != nil || line != "data: two\n" {
			t.Fatalf("second event: got %q, %v", line, err)
		}
	})

	t.Run("upgrade echoes", func(t *testing.T) {
		req, _ := http.NewRequest(http.MethodGet, base+"/ws", nil)
		req.Header.Set("Authorization", "Bearer "+u.token)
		req.Header.Set("Connection", "Upgrade")
		req.Header.Set("Upgrade", "echo")
		// The transport itself: a client's Timeout wraps the body, which
		// hides its write half.
		resp, err := h1.Transport.RoundTrip(req.WithContext(ctx))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		rw, ok := resp.Body.(io.ReadWriter)
		if resp.StatusCode != http.StatusSwitchingProtocols || !ok {
			t.Fatalf("got %s; want 101 and a two-way body", resp.Status)
		}
		if _, err := io.WriteString(rw, "ping"); err != nil {
			t.Fatal(err)
		}
		got := make([]byte, 4)
		if _, err := io.ReadFull(rw, got); err != nil || string(got) != "ping" {
			t.Fatalf("echo: got %q, %v", got, err)
		}
	})

	if m := e.gw.httpsMetrics(ex.Host); m.Requests() < 3 || m.BytesOut() == 0 {
		t.Errorf("metrics of %s: %d requests, %d bytes out; want them counted", ex.Host, m.Requests(), m.BytesOut())
	}

	t.Run("one-time link", func(t *testing.T) {
		link, err := u.client.ExposeLink(ctx, api.ExposeLinkRequest{Host: ex.Host, Path: "/notebook/tree?x=1"})
		if err != nil {
			t.Fatal(err)
		}
		jar, _ := cookiejar.New(nil)
		browser := &http.Client{Transport: h2.Transport, Jar: jar}
		url := base + api.LinkPath + "?code=" + link.Code
		resp, body := get(t, browser, url, "")
		if resp.StatusCode != http.StatusOK || body != `hello /notebook/tree auth="" cookie=true` {
			t.Fatalf("through the link: got %s %q; want the page the link names", resp.Status, body)
		}
		var front *http.Cookie
		for _, c := range resp.Request.Response.Cookies() { // the redirect's Set-Cookie
			if c.Name == httpfront.CookieName {
				front = c
			}
		}
		if front == nil || !front.Secure || !front.HttpOnly || front.SameSite != http.SameSiteLaxMode || front.Domain != "" || front.Path != "/" {
			t.Fatalf("front cookie: got %+v; want host-only, Secure, HttpOnly, SameSite, Path=/", front)
		}
		if resp, body := get(t, browser, base+"/again", ""); resp.StatusCode != http.StatusOK || body != `hello /again auth="" cookie=true` {
			t.Fatalf("with the cookie: got %s %q; want 200 and the front cookie kept from the renter", resp.Status, body)
		}
		if resp, _ := get(t, frontClient(t, ca, addr, true), url, ""); resp.StatusCode != http.StatusNotFound {
			t.Fatalf("the link a second time: got %s; want 404", resp.Status)
		}
		second, err := u.client.ExposeLink(ctx, api.ExposeLinkRequest{Host: ex.Host})
		if err != nil {
			t.Fatal(err)
		}
		if resp, _ := get(t, h2, "https://"+api.ExposureHost(alloc, 1999)+".localhost"+api.LinkPath+"?code="+second.Code, ""); resp.StatusCode != http.StatusNotFound {
			t.Fatalf("a link on another exposure's host: got %s; want 404", resp.Status)
		}
		for _, bad := range []string{"//evil.example/", "https://evil.example/", "/\\evil.example"} {
			if _, err := u.client.ExposeLink(ctx, api.ExposeLinkRequest{Host: ex.Host, Path: bad}); !errors.Is(err, api.ErrInvalidArgument) {
				t.Errorf("a link to %q: got %v; want invalid argument", bad, err)
			}
		}
		if _, err := other.client.ExposeLink(ctx, api.ExposeLinkRequest{Host: ex.Host}); !errors.Is(err, api.ErrForbidden) {
			t.Errorf("another user's link: got %v; want forbidden", err)
		}
	})

	t.Run("logout ends access", func(t *testing.T) {
		second := e.newLogin(u)
		if resp, body := get(t, h2, base+"/", second.token); resp.StatusCode != http.StatusOK {
			t.Fatalf("a second login: got %s %q; want 200", resp.Status, body)
		}
		if _, err := second.client.Logout(ctx); err != nil {
			t.Fatal(err)
		}
		testutil.EventuallyWithin(t, 5*time.Second, "401 after logout", func() bool {
			resp, _ := get(t, h2, base+"/", second.token)
			return resp.StatusCode == http.StatusUnauthorized
		})
	})

	t.Run("release ends access", func(t *testing.T) {
		alloc2 := e.addAlloc(u)
		ex2, err := u.client.ExposeCreate(ctx, api.ExposeCreateRequest{Allocation: alloc2, Port: int(port), Share: api.SharePublic, TTL: "10m"})
		if err != nil {
			t.Fatal(err)
		}
		url := "https://" + ex2.Host + ".localhost/"
		if resp, body := get(t, h2, url, ""); resp.StatusCode != http.StatusOK {
			t.Fatalf("public, no login: got %s %q; want 200", resp.Status, body)
		}
		if _, err := e.ctl.Server.Pool().Exec(ctx, `UPDATE allocations SET state = 'releasing' WHERE id = $1`, alloc2); err != nil {
			t.Fatal(err)
		}
		testutil.EventuallyWithin(t, 5*time.Second, "410 after release", func() bool {
			resp, _ := get(t, h2, url, "")
			return resp.StatusCode == http.StatusGone
		})
	})

	if _, err := u.client.ExposeRemove(ctx, api.ExposeRemoveRequest{Exposure: ex.ID}); err != nil {
		t.Fatal(err)
	}
	testutil.EventuallyWithin(t, 5*time.Second, "410 after removal", func() bool {
		resp, _ := get(t, h2, base+"/", u.token)
		return resp.StatusCode == http.StatusGone
	})
}
