package e2e

import (
	"bytes"
	"context"
	"crypto/rand"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gpuaas/gpuaas/internal/testutil"
)

// TestOpenSSHThroughGateway is acceptance 1 of the sshgate issue, with the
// system OpenSSH client against `gpuaas dev`: after `gpuaas login` and
// `gpuaas ssh-config`, `ssh <alloc>@localhost` runs commands with their
// exit status, scp and sftp move 100 MiB both ways byte for byte, and
// `ssh -L` forwards to a port on the target — for a bare-metal and a slice
// allocation. A PTY session is recorded and plays back what the client saw.
func TestOpenSSHThroughGateway(t *testing.T) {
	for _, tool := range []string{"ssh", "scp", "sftp"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("%s is not installed (apt-get install openssh-client): %v", tool, err)
		}
	}
	dev, cfg := loggedInDev(t)
	// The dev context knows its gateway, so login already wrote the config.
	if _, err := os.Stat(filepath.Join(cfg, "ssh", "dev", "config")); err != nil {
		t.Fatalf("login did not write the SSH config: %v", err)
	}
	if r := dev.gpuaas(t, "", "ssh-config"); r.code != 0 || !strings.Contains(r.stderr, "Include ") {
		t.Fatalf("ssh-config: exit %d %s", r.code, r.stderr)
	}
	sshConfig := filepath.Join(cfg, "ssh", "dev", "config")
	gateway := "localhost"

	blob := filepath.Join(tempDir(t, "gpuaas-e2e-blob-"), "blob")
	f, err := os.Create(blob)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.CopyN(f, rand.Reader, 100<<20); err != nil {
		t.Fatal(err)
	}
	f.Close()

	for _, sku := range []string{"h100-baremetal", "h200-slice"} {
		t.Run(sku, func(t *testing.T) {
			args := []string{"alloc", "create", "--sku", sku, "--wait", "--json", "id", "--jq", ".id"}
			if sku == "h200-slice" {
				args = append(args, "--gpus", "2")
			}
			r := dev.gpuaas(t, "", args...)
			id := strings.TrimSpace(r.stdout)
			if r.code != 0 || id == "" {
				t.Fatalf("create %s: exit %d %q\n%s", sku, r.code, r.stdout, r.stderr)
			}
			target := id + "@" + gateway

			out, code := openssh(t, "ssh", "-F", sshConfig, target, "echo hi; exit 3")
			if code != 3 || strings.TrimSpace(out) != "hi" {
				t.Fatalf("ssh exec: exit %d, output %q; want hi and 3", code, out)
			}

			back := blob + "." + sku + ".scp"
			if out, code := openssh(t, "scp", "-F", sshConfig, blob, target+":blob"); code != 0 {
				t.Fatalf("scp up: exit %d %s", code, out)
			}
			if out, code := openssh(t, "scp", "-F", sshConfig, target+":blob", back); code != 0 {
				t.Fatalf("scp down: exit %d %s", code, out)
			}
			sameFile(t, blob, back)

			sback := blob + "." + sku + ".sftp"
			batch := writeFile(t, filepath.Dir(blob), "batch-"+sku, fmt.Sprintf("put %s b2\nget b2 %s\n", blob, sback))
			if out, code := openssh(t, "sftp", "-q", "-F", sshConfig, "-b", batch, target); code != 0 {
				t.Fatalf("sftp: exit %d %s", code, out)
			}
			sameFile(t, blob, sback)

			forwardWorks(t, sshConfig, target)

			// A PTY session is recorded, and its recording plays what the
			// client saw.
			out, code = openssh(t, "ssh", "-F", sshConfig, "-tt", target, "echo recorded-$((6*7))")
			if code != 0 || !strings.Contains(out, "recorded-42") {
				t.Fatalf("ssh -tt: exit %d %q", code, out)
			}
			var sessionID string
			testutil.EventuallyWithin(t, time.Minute, "the PTY session to be indexed with its recording", func() bool {
				r := dev.gpuaas(t, "", "session", "list", "--alloc", id, "--json", "id,kind,recording",
					"--jq", `.[] | select(.kind=="shell" or .recording != "") | select(.recording != "") | .id`)
				sessionID = strings.TrimSpace(strings.Split(r.stdout, "\n")[0])
				return r.code == 0 && sessionID != ""
			})
			r = dev.gpuaas(t, "", "session", "play", sessionID, "--raw")
			if r.code != 0 || !strings.Contains(r.stdout, "recorded-42") || !strings.Contains(r.stdout, `"version":2`) && !strings.Contains(r.stdout, `"version": 2`) {
				t.Fatalf("session play --raw: exit %d %q", r.code, r.stdout)
			}
		})
	}
}

// openssh runs an OpenSSH tool with no stdin and returns its combined
// output and exit status.
func openssh(t *testing.T, name string, args ...string) (string, int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, append([]string{"-o", "BatchMode=yes"}, args...)...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr, cmd.Stdin = &out, &out, nil
	err := cmd.Run()
	if ee, ok := err.(*exec.ExitError); ok {
		return out.String(), ee.ExitCode()
	}
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return out.String(), 0
}

func sameFile(t *testing.T, a, b string) {
	t.Helper()
	x, err := os.ReadFile(a)
	if err != nil {
		t.Fatal(err)
	}
	y, err := os.ReadFile(b)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(x, y) {
		t.Fatalf("%s and %s differ (%d vs %d bytes)", a, b, len(x), len(y))
	}
}

// forwardWorks serves HTTP on a loopback port (the sim target is this
// machine) and fetches it through `ssh -L`.
func forwardWorks(t *testing.T, sshConfig, target string) {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "forwarded") })}
	go func() { _ = srv.Serve(l) }()
	defer srv.Close()
	local, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	localPort := local.Addr().(*net.TCPAddr).Port
	local.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	cmd := exec.CommandContext(ctx, "ssh", "-o", "BatchMode=yes", "-o", "ExitOnForwardFailure=yes", "-F", sshConfig, "-N",
		"-L", fmt.Sprintf("127.0.0.1:%d:%s", localPort, l.Addr().String()), target)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { cancel(); _ = cmd.Wait() }()
	defer func() {
		if t.Failed() {
			t.Logf("ssh -L:\n%s", out.String())
		}
	}()
	var body []byte
	testutil.EventuallyWithin(t, 30*time.Second, "ssh -L to forward", func() bool {
		resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/", localPort))
		if err != nil {
			return false // ssh has not opened the local port yet
		}
		body, _ = io.ReadAll(resp.Body)
		resp.Body.Close()
		return true
	})
	if string(body) != "forwarded" {
		t.Fatalf("through ssh -L got %q; want forwarded", body)
	}
}
