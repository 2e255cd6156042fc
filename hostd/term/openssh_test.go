package term_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	gossh "golang.org/x/crypto/ssh"

	"github.com/gpuaas/gpuaas/internal/sshcert"
	"github.com/gpuaas/gpuaas/internal/sshtest"
	"github.com/gpuaas/gpuaas/internal/testutil"
)

// openssh runs the system's OpenSSH tools against the harness, each with a
// gateway certificate and a fresh ticket (keys, certificates and a
// known_hosts pinning the server): OpenSSH does the two authentication
// steps as sshgate does.
type openssh struct {
	h    *harness
	dir  string
	port string
	n    int
}

func newOpenSSH(t *testing.T, h *harness) *openssh {
	sshtest.NeedOpenSSH(t, "ssh", "scp", "sftp")
	dir := t.TempDir()
	_, port, _ := net.SplitHostPort(h.addr)
	kh := fmt.Sprintf("[127.0.0.1]:%s %s", port, gossh.MarshalAuthorizedKey(h.hostKey))
	mustWrite(t, filepath.Join(dir, "known_hosts"), []byte(kh), 0o600)
	// The gateway's identity, offered first (as sshgate does).
	gwKey := sshtest.NewKey(t)
	gwCert, err := h.ca.SignGateway(sshtest.SignerOf(t, gwKey).PublicKey(), "openssh-gw", time.Hour, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	mustWrite(t, filepath.Join(dir, "gateway"), sshtest.PrivateKeyPEM(t, gwKey, ""), 0o600)
	mustWrite(t, filepath.Join(dir, "gateway-cert.pub"), gossh.MarshalAuthorizedKey(gwCert), 0o600)
	return &openssh{h: h, dir: dir, port: port}
}

// args are the options of one run: a new ticket in files of its own.
func (o *openssh) args(t *testing.T, portFlag string) []string {
	t.Helper()
	o.n++
	key := sshtest.NewKey(t)
	cert, err := o.h.ca.SignTicket(sshtest.SignerOf(t, key).PublicKey(), sshcert.Ticket{Node: testNode, Allocation: o.h.alloc, PosixUser: o.h.user}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	keyPath := filepath.Join(o.dir, fmt.Sprintf("id_%d", o.n))
	mustWrite(t, keyPath, sshtest.PrivateKeyPEM(t, key, ""), 0o600)
	mustWrite(t, keyPath+"-cert.pub", gossh.MarshalAuthorizedKey(cert), 0o600)
	gw := filepath.Join(o.dir, "gateway")
	return []string{"-F", "/dev/null", portFlag, o.port,
		"-i", gw, "-o", "CertificateFile=" + gw + "-cert.pub",
		"-i", keyPath, "-o", "CertificateFile=" + keyPath + "-cert.pub",
		"-o", "IdentitiesOnly=yes", "-o", "IdentityAgent=none", "-o", "BatchMode=yes",
		"-o", "StrictHostKeyChecking=yes", "-o", "UserKnownHostsFile=" + filepath.Join(o.dir, "known_hosts"),
		"-o", "ConnectTimeout=10"}
}

// run runs one of OpenSSH's tools and returns its output (stderr too when
// it failed) and exit code.
func (o *openssh) run(t *testing.T, stdin io.Reader, name string, args ...string) (string, int) {
	t.Helper()
	out, errOut, code := sshtest.RunTool(t, stdin, name, args...)
	if code != 0 {
		return out + errOut, code
	}
	return out, 0
}

// TestOpenSSH drives the terminal with the OpenSSH client, scp (both
// protocols), sftp and ssh -L, as sshgate's users do, for both shapes.
func TestOpenSSH(t *testing.T) {
	for _, shape := range shapes {
		t.Run(shape, func(t *testing.T) {
			t.Parallel()
			h := newHarness(t, shape)
			o := newOpenSSH(t, h)
			target := h.user + "@127.0.0.1"

			out, code := o.run(t, nil, "ssh", append(o.args(t, "-p"), target, "echo hi; exit 3")...)
			if code != 3 || out != "hi\n" {
				t.Errorf("ssh 'echo hi; exit 3': got %q, exit %d; want \"hi\\n\", exit 3", out, code)
			}
			out, code = o.run(t, nil, "ssh", append(o.args(t, "-p"), "-tt", target, "test -t 0 && echo on-a-tty")...)
			if code != 0 || !strings.Contains(out, "on-a-tty") {
				t.Errorf("ssh -tt: got %q, exit %d; want a terminal", out, code)
			}

			data := make([]byte, 4<<20)
			_, _ = rand.Read(data)
			local := filepath.Join(o.dir, "data.bin")
			mustWrite(t, local, data, 0o600)
			for _, proto := range []struct{ name, flag string }{{"sftp protocol", "-s"}, {"legacy protocol", "-O"}} {
				remote := "scp-" + proto.flag[1:] + ".bin"
				if out, code := o.run(t, nil, "scp", append(o.args(t, "-P"), proto.flag, local, target+":"+remote)...); code != 0 {
					t.Fatalf("scp %s put: exit %d: %s", proto.name, code, out)
				}
				if got, err := os.ReadFile(filepath.Join(h.home(), remote)); err != nil || !bytes.Equal(got, data) {
					t.Errorf("scp %s put: got %d bytes (%v); want %d", proto.name, len(got), err, len(data))
				}
				back := filepath.Join(o.dir, "back-"+remote)
				if out, code := o.run(t, nil, "scp", append(o.args(t, "-P"), proto.flag, target+":"+remote, back)...); code != 0 {
					t.Fatalf("scp %s get: exit %d: %s", proto.name, code, out)
				}
				if got, err := os.ReadFile(back); err != nil || !bytes.Equal(got, data) {
					t.Errorf("scp %s get: got %d bytes (%v); want %d", proto.name, len(got), err, len(data))
				}
			}

			back := filepath.Join(o.dir, "back-sftp.bin")
			batch := fmt.Sprintf("put %s sftp.bin\nget sftp.bin %s\n", local, back)
			if out, code := o.run(t, strings.NewReader(batch), "sftp", append(o.args(t, "-P"), "-b", "-", target)...); code != 0 {
				t.Fatalf("sftp -b: exit %d: %s", code, out)
			}
			if got, err := os.ReadFile(back); err != nil || !bytes.Equal(got, data) {
				t.Errorf("sftp put/get: got %d bytes (%v); want %d", len(got), err, len(data))
			}

			testLocalForward(t, o, target)
		})
	}
}

// testLocalForward runs ssh -N -L to a port listening on the target and
// talks through it.
func testLocalForward(t *testing.T, o *openssh, target string) {
	echo := sshtest.ListenEcho(t)
	free, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	localPort := portOf(free)
	free.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	args := append(o.args(t, "-p"), "-N", "-o", "ExitOnForwardFailure=yes",
		"-L", "127.0.0.1:"+localPort+":"+echo, target)
	cmd := exec.CommandContext(ctx, "ssh", args...)
	var errOut sshtest.Buffer
	cmd.Stderr = &errOut
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		cancel()
		_ = cmd.Wait()
	}()
	defer func() {
		if t.Failed() {
			t.Logf("ssh -L said %q", errOut.String())
		}
	}()
	var c net.Conn
	testutil.EventuallyWithin(t, 20*time.Second, "ssh -L to listen", func() bool {
		c, err = net.Dial("tcp", "127.0.0.1:"+localPort)
		return err == nil
	})
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(20 * time.Second))
	if _, err := io.WriteString(c, "through the tunnel"); err != nil {
		t.Fatal(err)
	}
	got := make([]byte, len("through the tunnel"))
	if _, err := io.ReadFull(c, got); err != nil || string(got) != "through the tunnel" {
		t.Errorf("ssh -L: got %q (%v); want the echo", got, err)
	}
}
