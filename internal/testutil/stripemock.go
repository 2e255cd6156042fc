package testutil

import (
	"bufio"
	"fmt"
	"go/build"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// StripeMockInstall is how a machine gets the stripe-mock the tests expect
// (.ci/run runs it).
const StripeMockInstall = "go install github.com/stripe/stripe-mock@v0.203.0"

// stripeMockStartTimeout bounds loading stripe-mock's OpenAPI spec, which
// takes a second or two on a loaded machine.
const stripeMockStartTimeout = time.Minute

// StripeMock starts Stripe's official API mock on a free loopback port for
// the test and returns its base URL ("http://127.0.0.1:PORT"). It is
// stopped at cleanup. The binary is looked up in PATH, then in
// $GOPATH/bin; without it the test fails and says how to install it, so a
// machine that lacks it is noticed rather than skipped.
//
// stripe-mock is stateless: it validates requests against Stripe's OpenAPI
// spec and answers fixtures, and it sends no webhooks (sign test events
// with webhook.GenerateTestSignedPayload instead).
func StripeMock(t testing.TB) string {
	t.Helper()
	bin, err := stripeMockBinary()
	if err != nil {
		t.Fatalf("stripe-mock: %v; install it with `%s`", err, StripeMockInstall)
	}
	// An empty port lets the kernel pick one, so parallel tests never
	// collide; the HTTPS listener is moved off its fixed default for the
	// same reason.
	cmd := exec.Command(bin, "-http-addr", "127.0.0.1:", "-https-addr", "127.0.0.1:")
	cmd.SysProcAttr = stripeMockProcAttr()
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatalf("stripe-mock: %v", err)
	}
	cmd.Stderr = cmd.Stdout
	if err := cmd.Start(); err != nil {
		t.Fatalf("start stripe-mock: %v", err)
	}
	exited := make(chan struct{})
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-exited
	})
	addr := make(chan string, 1)
	var out strings.Builder // what it printed, for a failure message
	go func() {
		defer close(exited)
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			line := sc.Text()
			if a, ok := strings.CutPrefix(line, "Listening for HTTP at address: "); ok {
				addr <- strings.TrimSpace(a)
			} else if len(addr) == 0 && out.Len() < 4096 {
				out.WriteString(line + "\n")
			}
		}
		_, _ = io.Copy(io.Discard, stdout)
		_ = cmd.Wait()
	}()
	select {
	case a := <-addr:
		return "http://" + a
	case <-exited:
		t.Fatalf("stripe-mock exited before listening:\n%s", out.String())
	case <-time.After(stripeMockStartTimeout):
		t.Fatalf("stripe-mock did not listen within %v", stripeMockStartTimeout)
	}
	return ""
}

// stripeMockBinary finds stripe-mock in PATH or where `go install` puts it.
func stripeMockBinary() (string, error) { return GoBinary("stripe-mock") }

// GoBinary finds a tool installed with `go install`: in PATH, then in
// $GOBIN and $GOPATH/bin.
func GoBinary(name string) (string, error) {
	if p, err := exec.LookPath(name); err == nil {
		return p, nil
	}
	var dirs []string
	if gobin := os.Getenv("GOBIN"); gobin != "" {
		dirs = append(dirs, gobin)
	}
	for _, gopath := range filepath.SplitList(build.Default.GOPATH) {
		dirs = append(dirs, filepath.Join(gopath, "bin"))
	}
	for _, d := range dirs {
		p := filepath.Join(d, name)
		if fi, err := os.Stat(p); err == nil && !fi.IsDir() && fi.Mode()&0o111 != 0 {
			return p, nil
		}
	}
	return "", fmt.Errorf("%s not found in PATH nor in %s", name, strings.Join(dirs, ", "))
}
