package sshgate

import (
	"bytes"
	"context"
	"crypto/rand"
	"io"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	gossh "golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/agent"

	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/sshcert"
	"github.com/gpuaas/gpuaas/internal/sshtest"
	"github.com/gpuaas/gpuaas/internal/sshwire"
	"github.com/gpuaas/gpuaas/internal/testutil"
)

// The rest of OpenSSH through the gateway (README, "OpenSSH through the gateway"), with the
// system's OpenSSH client against the real stack (controld, hostd agents,
// hostd's terminal server on sim hosts), on a bare-metal allocation and on
// a slice (through the VM hop into a sim guest). The sim's loopback is
// this machine's: what an allocation listens on, the test can dial.

// restStack is the real stack with one allocation of each shape, its
// owner set up for OpenSSH, and the gateway's and hosts' log kept.
type restStack struct {
	*realStack
	o      *openSSH
	owner  *user
	allocs []*api.Allocation // bare metal, then the slice
	log    *sshtest.Buffer
}

func startRestStack(t *testing.T) *restStack {
	t.Helper()
	if testing.Short() {
		t.Skip("starts Postgres, controld and two sim hosts")
	}
	sshtest.NeedOpenSSH(t, "ssh")
	logBuf := &sshtest.Buffer{}
	s := startRealStack(t, slog.New(slog.NewTextHandler(logBuf, &slog.HandlerOptions{Level: slog.LevelDebug})))
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("gateway and hosts log:\n%s", logBuf.String())
		}
	})
	owner := s.login(s.admin, s.env.Admin.ID)
	r := &restStack{realStack: s, o: newOpenSSHFor(t, s.addr, owner, s.hostCA), owner: owner, log: logBuf}
	r.allocs = []*api.Allocation{s.createAlloc(s.admin, "h100-baremetal", 8), s.createAlloc(s.admin, "h200-slice", 2)}
	return r
}

// ssh runs OpenSSH's ssh with args (before the target) against target
// running command, with extra environment, and returns its output and
// exit status.
func (r *restStack) ssh(t *testing.T, env []string, args []string, target, command string) (stdout, stderr string, code int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), sshtest.ToolTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, "ssh", r.sshArgs(args, target, command)...)
	cmd.Env = append(os.Environ(), env...)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("ssh: %v", err)
	}
	return out.String(), errOut.String(), code
}

func (r *restStack) sshArgs(args []string, target, command string) []string {
	out := append(append(append([]string{}, args...), r.o.args...), "-p", r.o.port, target)
	if command != "" {
		out = append(out, command)
	}
	return out
}

// TestSSHAgentForwardedThroughGateway: `ssh -A` forwards the client's
// agent (it was silently ignored: SSH_AUTH_SOCK empty): ssh-add -l on the
// allocation lists the key the local ssh-agent holds, the socket is 0600
// in a 0700 directory of its own, and it is gone when the session ends.
// Without -A there is no agent.
func TestSSHAgentForwardedThroughGateway(t *testing.T) {
	r := startRestStack(t)
	sock, comment := sshtest.StartAgent(t)
	env := []string{"SSH_AUTH_SOCK=" + sock}
	for _, a := range r.allocs {
		t.Run(a.Shape, func(t *testing.T) {
			target := a.ID + "@127.0.0.1"
			// IdentityAgent before the setup's "none" (the first value
			// wins): ssh would otherwise unset SSH_AUTH_SOCK.
			out, errOut, code := r.ssh(t, env, []string{"-A", "-o", "IdentityAgent=" + sock}, target,
				`echo "sock=$SSH_AUTH_SOCK"; stat -c '%a' "$SSH_AUTH_SOCK" "$(dirname "$SSH_AUTH_SOCK")"; ssh-add -l`)
			if code != 0 || !strings.Contains(out, comment) {
				t.Fatalf("ssh -A ... ssh-add -l: exit %d, %q %q; want the agent's key %s listed", code, out, errOut, comment)
			}
			lines := strings.Split(out, "\n")
			path, _ := strings.CutPrefix(lines[0], "sock=")
			if path == "" || len(lines) < 3 || lines[1] != "600" || lines[2] != "700" {
				t.Fatalf("got %q; want the socket's path, mode 600, and its directory's, 700", out)
			}
			testutil.Eventually(t, "the agent socket removed after the session", func() bool {
				_, err := os.Stat(filepath.Dir(path))
				return os.IsNotExist(err)
			})

			out, errOut, code = r.ssh(t, env, nil, target, `echo "sock=${SSH_AUTH_SOCK:-none}"`)
			if code != 0 || out != "sock=none\n" {
				t.Fatalf("ssh without -A: exit %d, %q %q; want no agent", code, out, errOut)
			}
		})
	}
}

// TestSSHRemoteForwardThroughGateway: `ssh -R` (it failed with OpenSSH's
// generic message) listens on the allocation's loopback and carries each
// connection back through the gateway to the client's side; the listener
// goes with the session. A privileged port is refused, and so is a
// forward the client cancels (cancel-tcpip-forward).
func TestSSHRemoteForwardThroughGateway(t *testing.T) {
	r := startRestStack(t)
	echo := sshtest.ListenEcho(t) // on the client's side
	for _, a := range r.allocs {
		t.Run(a.Shape, func(t *testing.T) {
			target := a.ID + "@127.0.0.1"
			port := freePort(t)
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			cmd := exec.CommandContext(ctx, "ssh", r.sshArgs([]string{"-N", "-o", "ExitOnForwardFailure=yes",
				"-R", "127.0.0.1:" + port + ":" + echo}, target, "")...)
			var errOut sshtest.Buffer
			cmd.Stderr = &errOut
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			exited := make(chan struct{})
			go func() { _ = cmd.Wait(); close(exited) }()
			defer func() {
				cancel()
				<-exited
				if t.Failed() {
					t.Logf("ssh -R said %q", errOut.String())
				}
			}()
			// The allocation's loopback (this machine's in the sim).
			var c net.Conn
			testutil.EventuallyWithin(t, 30*time.Second, "ssh -R to listen on the allocation", func() bool {
				var err error
				c, err = net.Dial("tcp", "127.0.0.1:"+port)
				return err == nil
			})
			echoes(t, c, "back through the gateway")
			c.Close()

			cancel()
			<-exited
			testutil.Eventually(t, "the remote listener closed with the session", func() bool {
				c, err := net.Dial("tcp", "127.0.0.1:"+port)
				if err == nil {
					c.Close()
				}
				return err != nil
			})

			_, stderr, code := r.ssh(t, nil, []string{"-N", "-o", "ExitOnForwardFailure=yes", "-R", "80:" + echo}, target, "")
			if code != 255 || !strings.Contains(stderr, "remote port forwarding failed") {
				t.Errorf("ssh -R 80: exit %d %q; want refused", code, stderr)
			}

			// Port 0 (the node picks) and cancel-tcpip-forward.
			ln, err := r.dial(r.owner, a.ID).Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatalf("tcpip-forward port 0: %v", err)
			}
			go func() {
				for {
					c, err := ln.Accept()
					if err != nil {
						return
					}
					go func() { _, _ = io.Copy(c, c); c.Close() }()
				}
			}()
			addr := ln.Addr().String()
			if _, p, _ := net.SplitHostPort(addr); p == "0" {
				t.Fatalf("listening on %s; want the port the node chose", addr)
			}
			c, err = net.Dial("tcp", addr)
			if err != nil {
				t.Fatal(err)
			}
			echoes(t, c, "port zero")
			c.Close()
			if err := ln.Close(); err != nil {
				t.Fatalf("cancel-tcpip-forward: %v", err)
			}
			testutil.Eventually(t, "the cancelled forward to stop listening", func() bool {
				c, err := net.Dial("tcp", addr)
				if err == nil {
					c.Close()
				}
				return err != nil
			})
		})
	}
}

// TestDroppedClientEnvLogged: variables outside the allow-list (TERM,
// LANG, LC_*) sent with SetEnv or SendEnv are still not passed on, but
// no longer silently: the gateway logs their names (never their values).
func TestDroppedClientEnvLogged(t *testing.T) {
	r := startRestStack(t)
	for _, a := range r.allocs {
		t.Run(a.Shape, func(t *testing.T) {
			out, errOut, code := r.ssh(t, []string{"PROBE_SENT=sent-secret"},
				[]string{"-o", "SetEnv=PROBE_SET=set-secret LC_PROBE=kept", "-o", "SendEnv=PROBE_SENT"},
				a.ID+"@127.0.0.1", `echo "${PROBE_SET:-dropped} ${PROBE_SENT:-dropped} $LC_PROBE"`)
			if code != 0 || out != "dropped dropped kept\n" {
				t.Fatalf("got %q %q, exit %d; want the two dropped and LC_PROBE kept", out, errOut, code)
			}
			var line string
			testutil.Eventually(t, "the dropped names logged", func() bool {
				for _, l := range strings.Split(r.log.String(), "\n") {
					if strings.Contains(l, "client environment not passed on") && strings.Contains(l, a.ID) {
						line = l
						return true
					}
				}
				return false
			})
			if !strings.Contains(line, "PROBE_SET") || !strings.Contains(line, "PROBE_SENT") || strings.Contains(line, "LC_PROBE") {
				t.Errorf("logged %q; want PROBE_SET and PROBE_SENT, not LC_PROBE", line)
			}
			if strings.Contains(r.log.String(), "secret") {
				t.Errorf("a value was logged:\n%s", r.log.String())
			}
		})
	}
}

// TestReleaseEndsEveryProcessOfTheUser: processes a user started and left
// running (nohup, setsid, one that ignores SIGTERM, python3 -m
// http.server) used to survive `alloc release`; releasing ends them all.
func TestReleaseEndsEveryProcessOfTheUser(t *testing.T) {
	r := startRestStack(t)
	server := "sleep 600"
	if _, err := os.Stat("/usr/bin/python3"); err == nil {
		server = "/usr/bin/python3 -m http.server 0 --bind 127.0.0.1"
	}
	script := `nohup ` + server + ` >/dev/null 2>&1 </dev/null & echo $!
setsid sleep 600 >/dev/null 2>&1 </dev/null & echo $!
setsid sh -c 'trap "" TERM HUP; while :; do sleep 1; done' >/dev/null 2>&1 </dev/null & echo $!`
	for _, a := range r.allocs {
		t.Run(a.Shape, func(t *testing.T) {
			out, errOut, code := r.ssh(t, nil, nil, a.ID+"@127.0.0.1", script)
			if code != 0 {
				t.Fatalf("start the background jobs: exit %d %q %q", code, out, errOut)
			}
			var pids []int
			for _, f := range strings.Fields(out) {
				pid, err := strconv.Atoi(f)
				if err != nil {
					t.Fatalf("got %q; want three pids", out)
				}
				pids = append(pids, pid)
			}
			if len(pids) != 3 {
				t.Fatalf("got %q; want three pids", out)
			}
			for _, pid := range pids {
				if !running(pid) {
					t.Fatalf("process %d is not running after the session; want it left behind", pid)
				}
			}
			ctx := context.Background()
			if _, err := r.admin.AllocRelease(ctx, api.AllocReleaseRequest{ID: a.ID}); err != nil {
				t.Fatal(err)
			}
			testutil.EventuallyWithin(t, time.Minute, "the allocation released", func() bool {
				got, err := r.admin.AllocGet(ctx, a.ID)
				return err == nil && got.State == api.AllocReleased
			})
			for _, pid := range pids {
				if running(pid) {
					t.Errorf("process %d outlived the release", pid)
				}
			}
		})
	}
}

// running reports whether pid is a live process (a zombie has ended).
func running(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	// pid (comm) state ...: the state follows the last ')'.
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	return i >= 0 && len(s) > i+2 && s[i+2] != 'Z' && s[i+2] != 'X'
}

func freePort(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	_, p, _ := net.SplitHostPort(l.Addr().String())
	return p
}

// echoes writes msg to c and wants it back.
func echoes(t *testing.T, c net.Conn, msg string) {
	t.Helper()
	_ = c.SetDeadline(time.Now().Add(20 * time.Second))
	if _, err := io.WriteString(c, msg); err != nil {
		t.Fatal(err)
	}
	got := make([]byte, len(msg))
	if _, err := io.ReadFull(c, got); err != nil || string(got) != msg {
		t.Fatalf("got %q (%v); want %q echoed", got, err, msg)
	}
}

// TestForwardingNeedsCertificateExtensions: a certificate without
// permit-port-forwarding cannot ask for a remote forward, and one without
// permit-agent-forwarding (minted before the gateway forwarded agents)
// gets no agent and is told why; the session itself still runs.
func TestForwardingNeedsCertificateExtensions(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{})
	owner := e.newUser()
	alloc := e.addAlloc(owner)
	caKey := sshtest.SignerOf(t, e.caKey(api.CAUser))
	k := sshtest.NewSigner(t)
	now := time.Now()
	cert := &gossh.Certificate{Key: k.PublicKey(), Serial: 7, CertType: gossh.UserCert, KeyId: "old@example.test",
		ValidPrincipals: []string{owner.id}, ValidAfter: uint64(now.Add(-time.Minute).Unix()), ValidBefore: uint64(now.Add(time.Hour).Unix()),
		Permissions: gossh.Permissions{Extensions: map[string]string{sshcert.ExtensionPermitPTY: "",
			sshcert.ExtensionSessionID: owner.cert.Extensions[sshcert.ExtensionSessionID]}}}
	if err := cert.SignCert(rand.Reader, caKey); err != nil {
		t.Fatal(err)
	}
	c, err := gossh.Dial("tcp", e.addr, e.clientConfig(alloc, gossh.PublicKeys(sshtest.CertSigner(t, cert, k))))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ok, _, err := c.SendRequest(sshwire.ForwardRequest, true, gossh.Marshal(sshwire.TCPIPForwardMsg{BindAddr: "127.0.0.1"}))
	if ok || err != nil {
		t.Errorf("tcpip-forward without permit-port-forwarding: ok %v, %v; want refused", ok, err)
	}
	if got := e.authorizedUsers(); len(got) != 0 {
		t.Errorf("gate.authorize asked for %q; want the forward refused before the node is reached", got)
	}
	s, err := c.NewSession()
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := agent.RequestAgentForwarding(s); err != nil {
		t.Fatal(err)
	}
	var stdout, stderr sshtest.Buffer
	s.Stdout, s.Stderr = &stdout, &stderr
	if err := s.Run("echo ran"); err != nil || stdout.String() != "ran\n" {
		t.Fatalf("session: %v %q %q; want it to run", err, stdout.String(), stderr.String())
	}
	if !strings.Contains(stderr.String(), "agent forwarding refused") {
		t.Errorf("stderr %q; want agent forwarding refused", stderr.String())
	}
}
