package e2e

import (
	"context"
	"fmt"
	"net"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gpuaas/gpuaas/internal/testutil"
)

// curlStatus fetches url with curl trusting the dev CA (curl resolves
// *.localhost to loopback itself) and returns the status code.
func curlStatus(t *testing.T, caFile, url string, args ...string) int {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	all := append([]string{"-sS", "-o", "/dev/null", "-w", "%{http_code}", "--cacert", caFile}, args...)
	out, err := exec.CommandContext(ctx, "curl", append(all, url)...).Output()
	if err != nil {
		t.Fatalf("curl %s: %v (%s)", url, err, out)
	}
	var code int
	fmt.Sscanf(string(out), "%d", &code)
	return code
}

// TestExposeHTTPS is `gpuaas expose` as a renter uses it, against the
// built binary's `gpuaas dev`, with curl as the client over TLS verified
// against the dev CA: a python3 server started over ssh in a bare-metal
// allocation is exposed to its owner (200 with the owner's token, 401
// without); a port outside 1–65535 and a TTL of 0 or over the maximum
// are refused with the reason and create nothing; `gpuaas open` gives a
// one-time link whose cookie opens it;
// removal answers 410; a public exposure with --ttl 10s opens without a
// login and then stops; after `gpuaas logout` the cookie is refused
// within 5 s; after release the URL answers 410.
func TestExposeHTTPS(t *testing.T) {
	for _, tool := range []string{"ssh", "curl"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("%s is not installed: %v", tool, err)
		}
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
	caFile := filepath.Join(data, "https-ca", "ca.pem")
	if !strings.Contains(dev.stderr.String(), "trust its dev CA: sudo cp "+caFile) {
		t.Fatalf("the banner does not print the line that trusts %s:\n%s", caFile, dev.stderr.String())
	}
	a := dev.createActive(t, "--sku", "h100-baremetal")

	// The renter's server, started over ssh in the allocation.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	sshConfig := filepath.Join(cfg, "ssh", "dev", "config")
	// setsid -f: the server leaves the session, which ends at once.
	if out, code := openssh(t, "ssh", "-F", sshConfig, a.ID+"@localhost",
		fmt.Sprintf("mkdir -p site && echo renter-page > site/index.html && cd site && setsid -f /usr/bin/python3 -m http.server %d --bind 127.0.0.1 </dev/null >/dev/null 2>&1", port)); code != 0 {
		t.Fatalf("start the server over ssh: exit %d %s", code, out)
	}
	// A sim bare-metal allocation shares this machine's loopback: wait for
	// the server there before going through the front.
	testutil.EventuallyWithin(t, time.Minute, "the renter's server to listen", func() bool {
		c, err := net.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", port))
		if err == nil {
			c.Close()
		}
		return err == nil
	})
	secret := strings.TrimSpace(run("token", "create", "ci", "--role", "member", "--ttl", "1d").stdout)
	bearer := "Authorization: Bearer " + secret

	url := strings.TrimSpace(run("expose", a.ID, fmt.Sprint(port), "--json", "url", "--jq", ".url").stdout)
	if !strings.HasPrefix(url, fmt.Sprintf("https://%d-%s.localhost:", port, a.ID)) {
		t.Fatalf("expose printed %q; want https://%d-%s.localhost:PORT", url, port, a.ID)
	}
	// Shared with "me", the login that created it: the member token is
	// another principal, refused with 403.
	if got := curlStatus(t, caFile, url+"/", "-H", bearer); got != 403 {
		t.Fatalf("another principal's token: got %d; want 403", got)
	}
	if got := curlStatus(t, caFile, url+"/"); got != 401 {
		t.Fatalf("no login: got %d; want 401", got)
	}
	// Bad input is refused with the reason and creates nothing: by the
	// CLI (usage, exit 2) before the request, else by the server
	// (invalid argument, exit 7).
	for _, bad := range []struct {
		args   []string
		reason string
	}{
		{[]string{"expose", a.ID, "0"}, "port"},
		{[]string{"expose", a.ID, "70000"}, "port"},
		{[]string{"expose", a.ID, fmt.Sprint(port + 1), "--ttl", "0"}, "ttl"},
		{[]string{"expose", a.ID, fmt.Sprint(port + 1), "--ttl", "31d"}, "ttl"},
	} {
		if r := dev.gpuaas(t, "", bad.args...); (r.code != 2 && r.code != 7) || !strings.Contains(strings.ToLower(r.stderr), bad.reason) {
			t.Errorf("gpuaas %s: exit %d, stderr %q; want 2 or 7 and the reason (%s)", strings.Join(bad.args, " "), r.code, r.stderr, bad.reason)
		}
	}
	if n := strings.TrimSpace(run("expose", "list", "--alloc", a.ID, "--json", "id", "--jq", "length").stdout); n != "1" {
		t.Fatalf("exposures after the refused ones: %s; want 1", n)
	}

	jar := filepath.Join(tempDir(t, "gpuaas-e2e-jar-"), "cookies")
	link := strings.TrimSpace(run("open", "--print", url+"/index.html").stdout)
	if got := curlStatus(t, caFile, link, "-L", "-c", jar, "-b", jar); got != 200 {
		t.Fatalf("through the one-time link: got %d; want 200", got)
	}
	if got := curlStatus(t, caFile, url+"/", "-b", jar); got != 200 {
		t.Fatalf("with the link's cookie: got %d; want 200", got)
	}
	if got := curlStatus(t, caFile, link, "-L"); got != 404 {
		t.Fatalf("the link a second time: got %d; want 404", got)
	}

	run("expose", "rm", exposureID(t, dev, a.ID))
	testutil.EventuallyWithin(t, 5*time.Second, "410 after expose rm", func() bool {
		return curlStatus(t, caFile, url+"/", "-b", jar) == 410
	})

	// Public for 10 s: no login, then 410 (polled; the TTL is the server's).
	run("expose", a.ID, fmt.Sprint(port), "--share", "public", "--ttl", "10s")
	if got := curlStatus(t, caFile, url+"/"); got != 200 {
		t.Fatalf("public, no login: got %d; want 200", got)
	}
	testutil.EventuallyWithin(t, 30*time.Second, "a public exposure to stop after its 10s", func() bool {
		return curlStatus(t, caFile, url+"/") == 410
	})

	// Logout ends the browser's access within 5 s.
	run("expose", a.ID, fmt.Sprint(port))
	link = strings.TrimSpace(run("open", "--print", url+"/").stdout)
	if got := curlStatus(t, caFile, link, "-L", "-c", jar, "-b", jar); got != 200 {
		t.Fatalf("through a new link: got %d; want 200", got)
	}
	run("logout")
	testutil.EventuallyWithin(t, 5*time.Second, "401 after logout", func() bool {
		return curlStatus(t, caFile, url+"/", "-b", jar) == 401
	})

	// Release ends it for everyone.
	if r := dev.gpuaas(t, devPassword, "login", "--password-stdin"); r.code != 0 {
		t.Fatalf("login again: exit %d %s", r.code, r.stderr)
	}
	run("alloc", "release", a.ID)
	testutil.EventuallyWithin(t, 5*time.Second, "410 after release", func() bool {
		code := curlStatus(t, caFile, url+"/", "-H", bearer)
		return code == 410 || code == 404
	})
}

// exposureID is the id of the allocation's one live exposure.
func exposureID(t *testing.T, dev *devProc, alloc string) string {
	t.Helper()
	r := dev.gpuaas(t, "", "expose", "list", "--alloc", alloc, "--json", "id", "--jq", ".[0].id")
	id := strings.TrimSpace(r.stdout)
	if r.code != 0 || id == "" {
		t.Fatalf("expose list: exit %d %q %s", r.code, r.stdout, r.stderr)
	}
	return id
}
