package e2e

import (
	"context"
	"encoding/base64"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/gpuaas/gpuaas/internal/testutil"
)

// chromiumPath is Debian's chromium (scripts/deps installs it for tests).
const chromiumPath = "/usr/bin/chromium"

// browser starts headless Chromium whose NSS database (its own HOME)
// trusts caFile, as a user's browser does once they ran the dev banner's
// trust line; it is closed when the test ends.
func browser(t *testing.T, caFile string) context.Context {
	t.Helper()
	for _, tool := range []string{chromiumPath, "certutil"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("%s is not installed (scripts/deps test installs chromium and libnss3-tools): %v", tool, err)
		}
	}
	home := tempDir(t, "gpuaas-e2e-chrome-")
	nssdb := filepath.Join(home, ".pki", "nssdb")
	if err := os.MkdirAll(nssdb, 0o700); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{
		{"-d", "sql:" + nssdb, "-N", "--empty-password"},
		{"-d", "sql:" + nssdb, "-A", "-t", "C,,", "-n", "gpuaas-dev", "-i", caFile},
	} {
		if out, err := exec.Command("certutil", args...).CombinedOutput(); err != nil {
			t.Fatalf("certutil %v: %v\n%s", args, err, out)
		}
	}
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(chromiumPath),
		chromedp.UserDataDir(filepath.Join(home, "profile")),
		chromedp.Env("HOME="+home),
		// Root in a container: Chromium's sandbox needs user namespaces
		// it may not have here.
		chromedp.NoSandbox,
	)
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancel := chromedp.NewContext(actx)
	t.Cleanup(func() { cancel(); cancelAlloc() })
	// The first action starts the browser, for as long as ctx lives.
	if err := chromedp.Do(ctx); err != nil {
		t.Fatalf("start chromium: %v", err)
	}
	return ctx
}

// evalPromise evaluates js (an expression giving a promise) in the page
// and returns what it resolves to, within a minute.
func evalPromise[T any](ctx context.Context, js string) (T, error) {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	return chromedp.Run(ctx, chromedp.Evaluate[T](js, chromedp.EvalAwaitPromise))
}

// TestExposeInBrowser is an exposure as a person uses it: headless
// Chromium (Debian's) trusting the dev CA opens the one-time link that
// `gpuaas open` mints, lands on the renter's page over HTTPS with the
// login cookie set, echoes a WebSocket message and receives a server-sent
// event while the server still holds its stream open (a buffering proxy
// shows nothing); after `gpuaas logout` the page's next request is
// refused within 5 s, and after release the URL answers 410 or 404 with
// a page saying the exposure ended.
// A second user of the project (share me) cannot mint a link, and their
// own browser, which has none of the first one's cookies, gets the login
// page and, with their login as the bearer, the 403 page.
func TestExposeInBrowser(t *testing.T) {
	script, err := os.ReadFile(filepath.Join("testdata", "renter_server.py"))
	if err != nil {
		t.Fatal(err)
	}
	data, cfg := tempDir(t, "gpuaas-e2e-data-"), tempDir(t, "gpuaas-e2e-cfg-")
	pwFile := writeFile(t, cfg, "pw", devPassword+"\n")
	dev := startDev(t, data, cfg, "--password-file", pwFile)
	run := func(args ...string) result {
		t.Helper()
		r := dev.gpuaas(t, "", args...)
		if r.code != 0 {
			t.Fatalf("gpuaas %s: exit %d\n%s", strings.Join(args, " "), r.code, r.stderr)
		}
		return r
	}
	if r := dev.gpuaas(t, devPassword, "login", "--password-stdin"); r.code != 0 {
		t.Fatalf("login: exit %d %s", r.code, r.stderr)
	}
	ctx := browser(t, filepath.Join(data, "https-ca", "ca.pem"))
	a := dev.createActive(t, "--sku", "h100-baremetal")

	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	sshConfig := filepath.Join(cfg, "ssh", "dev", "config")
	if out, code := openssh(t, "ssh", "-F", sshConfig, a.ID+"@localhost", fmt.Sprintf(
		"echo %s | base64 -d > srv.py && setsid -f /usr/bin/python3 srv.py %d </dev/null >/dev/null 2>&1",
		base64.StdEncoding.EncodeToString(script), port)); code != 0 {
		t.Fatalf("start the server over ssh: exit %d %s", code, out)
	}
	testutil.EventuallyWithin(t, time.Minute, "the renter's server to listen", func() bool {
		c, err := net.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", port))
		if err == nil {
			c.Close()
		}
		return err == nil
	})
	url := strings.TrimSpace(run("expose", a.ID, fmt.Sprint(port), "--json", "url", "--jq", ".url").stdout)
	link := strings.TrimSpace(run("open", "--print", url+"/").stdout)

	nctx, cancel := context.WithTimeout(ctx, time.Minute)
	err = chromedp.Do(nctx, chromedp.Navigate(link), chromedp.WaitVisible(chromedp.CSS("#p")))
	var text, location string
	if err == nil {
		text, err = chromedp.Run(nctx, chromedp.Text(chromedp.CSS("#p")))
	}
	if err == nil {
		location, err = chromedp.Run(nctx, chromedp.Location())
	}
	cancel()
	if err != nil || text != "renter-page" || !strings.HasPrefix(location, url+"/") {
		t.Fatalf("through the one-time link: text %q at %s, %v; want the renter's page under %s", text, location, err, url)
	}

	if echo, err := evalPromise[string](ctx, `new Promise((resolve, reject) => {
		const ws = new WebSocket(location.origin.replace(/^https/, "wss") + "/ws");
		ws.onopen = () => ws.send("ping-42");
		ws.onmessage = (e) => { resolve(e.data); ws.close(); };
		ws.onerror = () => reject(new Error("websocket failed"));
	})`); err != nil || echo != "echo:ping-42" {
		t.Fatalf("websocket: %q, %v; want echo:ping-42", echo, err)
	}

	// "one" arrives while the server holds the stream open: only then is
	// the server told to go on.
	if first, err := evalPromise[string](ctx, `new Promise((resolve, reject) => {
		const es = new EventSource("/events");
		es.onmessage = (e) => { resolve(e.data); es.close(); };
		es.onerror = () => reject(new Error("event stream failed"));
	})`); err != nil || first != "one" {
		t.Fatalf("server-sent events: %q, %v; want one before the stream ends", first, err)
	}
	if released, err := evalPromise[string](ctx, `fetch("/release").then((r) => r.text())`); err != nil || released != "released" {
		t.Fatalf("release the stream: %q, %v", released, err)
	}

	secondUserRefused(t, dev, ctx, url)

	status := func() int {
		t.Helper()
		code, err := evalPromise[int](ctx, `fetch("/", {cache: "no-store"}).then((r) => r.status)`)
		if err != nil {
			t.Fatalf("fetch from the page: %v", err)
		}
		return code
	}
	if got := status(); got != 200 {
		t.Fatalf("the page's own request: %d; want 200", got)
	}
	run("logout")
	testutil.EventuallyWithin(t, 5*time.Second, "the browser refused after logout", func() bool { return status() == 401 })

	if r := dev.gpuaas(t, devPassword, "login", "--password-stdin"); r.code != 0 {
		t.Fatalf("login again: exit %d %s", r.code, r.stderr)
	}
	run("alloc", "release", a.ID)
	testutil.EventuallyWithin(t, 10*time.Second, "410 or 404 after release", func() bool {
		code := status()
		return code == 410 || code == 404
	})
	// What the person sees there: a page saying the exposure ended.
	nctx, cancel = context.WithTimeout(ctx, time.Minute)
	defer cancel()
	var heading, body string
	if err := chromedp.Do(nctx, chromedp.Navigate(url+"/")); err != nil {
		t.Fatalf("open %s after release: %v", url, err)
	}
	if heading, err = chromedp.Run(nctx, chromedp.Text(chromedp.CSS("h1"))); err == nil {
		body, err = chromedp.Run(nctx, chromedp.Text(chromedp.CSS("body")))
	}
	if err != nil || (heading != "This exposure has ended" && heading != "No such exposure") || !strings.Contains(body, a.ID) {
		t.Fatalf("the page after release: %q / %q, %v; want \"This exposure has ended\" (or \"No such exposure\") naming %s", heading, body, err, a.ID)
	}
}
