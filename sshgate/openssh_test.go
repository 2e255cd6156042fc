package sshgate

import (
	"bytes"
	"crypto/rand"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	gossh "golang.org/x/crypto/ssh"

	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/sshcert"
	"github.com/gpuaas/gpuaas/internal/sshtest"
)

// openSSH drives the system's OpenSSH client against the gateway, set up
// as `gpuaas ssh-config` sets it up: the key, its certificate, and only an
// @cert-authority line for the gateway in known_hosts — so the host
// certificate is checked with StrictHostKeyChecking and no prompt.
type openSSH struct {
	t    *testing.T
	dir  string
	port string
	args []string
}

func newOpenSSH(t *testing.T, e *env, u *user) *openSSH {
	t.Helper()
	return newOpenSSHFor(t, e.addr, u, e.hostCA)
}

// newOpenSSHFor sets OpenSSH up for the gateway at addr whose host CA
// keys are hostCA.
func newOpenSSHFor(t *testing.T, addr string, u *user, hostCA []gossh.PublicKey) *openSSH {
	t.Helper()
	sshtest.NeedOpenSSH(t, "ssh")
	dir := t.TempDir()
	pemBytes, err := sshcert.MarshalPrivateKey(u.key, u.id, nil)
	if err != nil {
		t.Fatal(err)
	}
	_, port, _ := net.SplitHostPort(addr)
	var known []string
	for _, k := range hostCA {
		known = append(known, "@cert-authority [127.0.0.1]:"+port+" "+strings.TrimSpace(string(gossh.MarshalAuthorizedKey(k))))
	}
	files := map[string][]byte{
		"id_ed25519":          pemBytes,
		"id_ed25519-cert.pub": gossh.MarshalAuthorizedKey(u.cert),
		"known_hosts":         []byte(strings.Join(known, "\n") + "\n"),
	}
	for name, data := range files {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return &openSSH{t: t, dir: dir, port: port, args: []string{
		"-F", "/dev/null",
		"-i", filepath.Join(dir, "id_ed25519"),
		"-o", "CertificateFile=" + filepath.Join(dir, "id_ed25519-cert.pub"),
		"-o", "IdentitiesOnly=yes",
		"-o", "IdentityAgent=none",
		"-o", "BatchMode=yes",
		"-o", "StrictHostKeyChecking=yes",
		"-o", "UserKnownHostsFile=" + filepath.Join(dir, "known_hosts"),
		"-o", "GlobalKnownHostsFile=/dev/null",
		"-o", "LogLevel=ERROR",
	}}
}

// run runs one of ssh, scp, sftp (port flag -p or -P) and returns its
// output and exit code.
func (o *openSSH) run(stdin []byte, prog string, args ...string) (stdout, stderr string, code int) {
	o.t.Helper()
	portFlag := "-p"
	if prog != "ssh" {
		portFlag = "-P"
	}
	return sshtest.RunTool(o.t, bytes.NewReader(stdin), prog, append(append(append([]string{}, o.args...), portFlag, o.port), args...)...)
}

// TestOpenSSH: plain OpenSSH through the gateway — exec with its exit
// status, a forced PTY (recorded), sftp and scp both ways byte for byte,
// and a direct-tcpip forward (ssh -W).
func TestOpenSSH(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{})
	u := e.newUser()
	alloc := e.addAlloc(u)
	o := newOpenSSH(t, e, u)
	target := alloc + "@127.0.0.1"

	t.Run("exec", func(t *testing.T) {
		out, errOut, code := o.run(nil, "ssh", target, "echo hi; exit 3")
		if out != "hi\n" || code != 3 {
			t.Fatalf("got stdout %q, stderr %q, exit %d; want \"hi\\n\" and 3", out, errOut, code)
		}
	})
	t.Run("pty", func(t *testing.T) {
		out, errOut, code := o.run(nil, "ssh", "-tt", target, "echo pty-ok; exit 4")
		if !strings.Contains(out, "pty-ok\r\n") || code != 4 {
			t.Fatalf("got stdout %q, stderr %q, exit %d; want pty-ok with CRLF and 4", out, errOut, code)
		}
		if ts := e.endedSession(t, api.SessionExec, "echo pty-ok; exit 4"); ts.Recording == "" {
			t.Fatalf("got index entry %+v; want a recording", ts)
		}
	})
	t.Run("sftp and scp", func(t *testing.T) {
		local := t.TempDir()
		remote := t.TempDir() // the test node runs on this machine
		payload := make([]byte, 5<<20+3)
		if _, err := rand.Read(payload); err != nil {
			t.Fatal(err)
		}
		src := filepath.Join(local, "up.bin")
		if err := os.WriteFile(src, payload, 0o600); err != nil {
			t.Fatal(err)
		}
		check := func(what, path string) {
			got, err := os.ReadFile(path)
			if err != nil || !bytes.Equal(got, payload) {
				t.Fatalf("%s: got %d bytes (%v); want the %d bytes sent", what, len(got), err, len(payload))
			}
		}
		if _, errOut, code := o.run(nil, "scp", "-q", src, target+":"+filepath.Join(remote, "scp.bin")); code != 0 {
			t.Fatalf("scp up: exit %d: %s", code, errOut)
		}
		check("scp up", filepath.Join(remote, "scp.bin"))
		if _, errOut, code := o.run(nil, "scp", "-q", target+":"+filepath.Join(remote, "scp.bin"), filepath.Join(local, "scp-down.bin")); code != 0 {
			t.Fatalf("scp down: exit %d: %s", code, errOut)
		}
		check("scp down", filepath.Join(local, "scp-down.bin"))

		batch := "put " + src + " " + filepath.Join(remote, "sftp.bin") + "\nget " + filepath.Join(remote, "sftp.bin") + " " + filepath.Join(local, "sftp-down.bin") + "\n"
		if _, errOut, code := o.run([]byte(batch), "sftp", "-q", "-b", "-", target); code != 0 {
			t.Fatalf("sftp: exit %d: %s", code, errOut)
		}
		check("sftp put", filepath.Join(remote, "sftp.bin"))
		check("sftp get", filepath.Join(local, "sftp-down.bin"))
	})
	t.Run("forward", func(t *testing.T) {
		echo := sshtest.ListenEcho(t)
		out, errOut, code := o.run([]byte("through the tunnel\n"), "ssh", "-W", echo, target)
		if out != "through the tunnel\n" || code != 0 {
			t.Fatalf("got %q, stderr %q, exit %d; want the line echoed", out, errOut, code)
		}
	})
	t.Run("unknown host CA refused", func(t *testing.T) {
		other := sshtest.NewAuthority(t, "host")
		lines, _ := other.KnownHostsLines("[127.0.0.1]:" + o.port)
		known := filepath.Join(o.dir, "known_hosts")
		saved, _ := os.ReadFile(known)
		if err := os.WriteFile(known, []byte(strings.Join(lines, "\n")+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		defer os.WriteFile(known, saved, 0o600)
		if _, errOut, code := o.run(nil, "ssh", target, "true"); code != 255 || !strings.Contains(errOut, "Host key verification failed") {
			t.Fatalf("got exit %d, stderr %q; want host key verification to fail", code, errOut)
		}
	})
}
