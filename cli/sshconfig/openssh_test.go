package sshconfig

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"net"
	"os/exec"
	"strings"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"

	"github.com/gpuaas/gpuaas/internal/sshcert"
	"github.com/gpuaas/gpuaas/internal/sshconfig"
	"github.com/gpuaas/gpuaas/internal/sshkeys/sshkeystest"
)

func needSSH(t *testing.T) string {
	t.Helper()
	path, err := exec.LookPath("ssh")
	if err != nil {
		t.Skip("OpenSSH client not installed")
	}
	return path
}

// sshG returns what `ssh -G` resolves for destination under config.
func sshG(t *testing.T, sshPath, config, destination string) map[string]string {
	t.Helper()
	out, err := exec.Command(sshPath, "-G", "-F", config, destination).Output()
	if err != nil {
		t.Fatalf("ssh -G %s: %v", destination, err)
	}
	got := map[string]string{}
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		k, v, _ := strings.Cut(sc.Text(), " ")
		if _, seen := got[k]; !seen { // first identityfile etc.
			got[k] = v
		}
	}
	return got
}

// TestOpenSSHReadsConfig checks what OpenSSH itself makes of the config:
// the alias and `<alloc-id>@<gateway host>` get the gateway's port, key,
// certificate and known_hosts; plain `ssh <gateway host>` is untouched.
// It is also the regression test of "ssh-config has no Host entry for the
// gateway itself": `ssh gpuaas-dev` reaches the gateway as sshconfig.CommandUser.
func TestOpenSSHReadsConfig(t *testing.T) {
	sshPath := needSSH(t)
	f := newFixture(t, time.Now())
	s, err := Prepare(context.Background(), f.env, "")
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		destination string
		wantOurs    bool
		wantUser    string // "" = not checked
	}{
		{"a-7k2m9x4q1c@localhost", true, "a-7k2m9x4q1c"},
		{"a-7k2m9x4q1c@gpuaas-dev", true, "a-7k2m9x4q1c"},
		// The gateway itself: the dashboard, or commands.
		{"gpuaas-dev", true, sshconfig.CommandUser},
		{sshconfig.CommandUser + "@localhost", true, sshconfig.CommandUser},
		{"localhost", false, ""},
		{"someone@localhost", false, ""},
	}
	for _, tt := range tests {
		got := sshG(t, sshPath, s.Paths.Config, tt.destination)
		if tt.wantUser != "" && got["user"] != tt.wantUser {
			t.Errorf("%s: got user %q; want %q", tt.destination, got["user"], tt.wantUser)
		}
		ours := got["port"] == "2222" && got["identityfile"] == s.Paths.Key && got["certificatefile"] == s.Paths.Cert &&
			got["userknownhostsfile"] == s.Paths.KnownHosts && got["stricthostkeychecking"] == "true" && got["hostname"] == "localhost"
		if ours != tt.wantOurs {
			t.Errorf("%s: got port %s identityfile %s certificatefile %s userknownhostsfile %s; want the gateway's settings %v",
				tt.destination, got["port"], got["identityfile"], got["certificatefile"], got["userknownhostsfile"], tt.wantOurs)
		}
	}
}

// TestOpenSSHConnectsWithGeneratedFiles runs the real OpenSSH client with
// the generated config against a loopback server that, like the gateway,
// presents a host certificate from the host CA and accepts only user
// certificates from the user CA.
func TestOpenSSHConnectsWithGeneratedFiles(t *testing.T) {
	sshPath := needSSH(t)
	f := newFixture(t, time.Now())
	addr := startGateway(t, f.ctrl)
	f.ctrl.Update(func(s *sshkeystest.Settings) { s.Gateway = addr })
	s, err := Prepare(context.Background(), f.env, "")
	if err != nil {
		t.Fatal(err)
	}
	for _, dest := range []string{"a-7k2m9x4q1c@" + s.Alias, "a-7k2m9x4q1c@127.0.0.1"} {
		cmd := exec.Command(sshPath, "-F", s.Paths.Config, "-o", "BatchMode=yes", dest, "--", "whoami")
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		exitErr, _ := err.(*exec.ExitError)
		if exitErr == nil || exitErr.ExitCode() != 3 {
			t.Fatalf("%s: got %v; want exit status 3 (stderr %q)", dest, err, stderr.String())
		}
		if want := "a-7k2m9x4q1c as " + sshkeystest.UserID + ": whoami\n"; string(out) != want {
			t.Errorf("%s: got %q; want %q", dest, out, want)
		}
	}
}

// startGateway serves SSH on 127.0.0.1: host certificate from the host CA,
// user certificates from the user CA for the stand-in's user; an exec
// prints "<user> as <principal>: <command>" and exits 3.
func startGateway(t *testing.T, ctrl *sshkeystest.Controld) string {
	t.Helper()
	_, hostKey := hostSigner(t, ctrl.HostCA, "127.0.0.1")
	cfg := &ssh.ServerConfig{
		PublicKeyCallback: func(_ ssh.ConnMetadata, key ssh.PublicKey) (*ssh.Permissions, error) {
			id, err := sshcert.VerifyUser(ctrl.UserCA.Trusted(), key, sshkeystest.UserID, time.Now())
			if err != nil {
				return nil, err
			}
			return &ssh.Permissions{Extensions: map[string]string{"user-id": id.UserID}}, nil
		},
	}
	cfg.AddHostKey(hostKey)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go serveExec(c, cfg)
		}
	}()
	return ln.Addr().String()
}

func serveExec(c net.Conn, cfg *ssh.ServerConfig) {
	defer c.Close()
	conn, chans, reqs, err := ssh.NewServerConn(c, cfg)
	if err != nil {
		return
	}
	go ssh.DiscardRequests(reqs)
	for nc := range chans {
		if nc.ChannelType() != "session" {
			_ = nc.Reject(ssh.UnknownChannelType, "session only")
			continue
		}
		ch, reqs, err := nc.Accept()
		if err != nil {
			return
		}
		for req := range reqs {
			if req.Type != "exec" {
				_ = req.Reply(false, nil)
				continue
			}
			var exec struct{ Command string }
			_ = ssh.Unmarshal(req.Payload, &exec)
			_ = req.Reply(true, nil)
			fmt.Fprintf(ch, "%s as %s: %s\n", conn.User(), conn.Permissions.Extensions["user-id"], exec.Command)
			_, _ = ch.SendRequest("exit-status", false, ssh.Marshal(struct{ Status uint32 }{3}))
			ch.Close()
			break
		}
	}
}
