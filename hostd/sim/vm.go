package sim

import (
	"bytes"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"time"

	"github.com/gliderlabs/ssh"
	"go.yaml.in/yaml/v3"
	gossh "golang.org/x/crypto/ssh"

	"github.com/gpuaas/gpuaas/hostd/host"
)

// vm is a running sim guest: an SSH server on 127.0.0.1 that lets in the
// users of the domain's cloud-init seed with their keys and runs their
// commands with sh in a sandbox home directory. There is no PTY: a
// session without a command gets sh reading its stdin.
type vm struct {
	srv  *ssh.Server
	ln   net.Listener
	addr string
	done chan struct{}
}

// guestPath is the PATH of commands run in a sim guest.
const guestPath = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

func startVM(spec host.DomainSpec, hostKey gossh.Signer, sandbox string) (*vm, error) {
	var users map[string][]gossh.PublicKey
	if spec.SeedISO != "" {
		var err error
		if users, err = seedUsers(filepath.Join(filepath.Dir(spec.SeedISO), "user-data")); err != nil {
			return nil, err
		}
	}
	if err := os.MkdirAll(sandbox, 0o700); err != nil {
		return nil, err
	}
	srv := &ssh.Server{
		Version:     "OpenSSH_9.6p1 gpuaas-sim",
		HostSigners: []ssh.Signer{hostKey},
		PublicKeyHandler: func(ctx ssh.Context, key ssh.PublicKey) bool {
			for _, k := range users[ctx.User()] {
				if ssh.KeysEqual(k, key) {
					return true
				}
			}
			return false
		},
		Handler: func(s ssh.Session) { serveSession(s, filepath.Join(sandbox, s.User())) },
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	v := &vm{srv: srv, ln: ln, addr: ln.Addr().String(), done: make(chan struct{})}
	go func() {
		defer close(v.done)
		_ = srv.Serve(ln)
	}()
	return v, nil
}

// stop closes the listener and every connection; the sessions' commands
// are killed as their contexts end. The listener is closed here too: the
// server only closes listeners Serve has registered, and Serve may not
// have begun yet.
func (v *vm) stop() {
	_ = v.ln.Close()
	_ = v.srv.Close()
	<-v.done
}

// serveSession runs the session's command (or sh on its stdin) in home
// and reports its exit status.
func serveSession(s ssh.Session, home string) {
	if s.Subsystem() != "" {
		fmt.Fprintf(s.Stderr(), "subsystem %s is not available in a sim guest\n", s.Subsystem())
		_ = s.Exit(1)
		return
	}
	if err := os.MkdirAll(home, 0o700); err != nil {
		fmt.Fprintf(s.Stderr(), "sim guest: %v\n", err)
		_ = s.Exit(1)
		return
	}
	args := []string{"sh"}
	if raw := s.RawCommand(); raw != "" {
		args = append(args, "-c", raw)
	}
	cmd := exec.CommandContext(s.Context(), args[0], args[1:]...)
	cmd.Dir = home
	cmd.Env = append(s.Environ(), "HOME="+home, "USER="+s.User(), "LOGNAME="+s.User(), "SHELL=/bin/sh", "PATH="+guestPath)
	cmd.Stdout, cmd.Stderr = s, s.Stderr()
	// A process group of its own, so the whole command goes when the
	// session does; WaitDelay stops a background child that keeps the
	// output open from holding the session.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 2 * time.Second
	stdin, err := cmd.StdinPipe()
	if err == nil {
		err = cmd.Start()
	}
	if err != nil {
		fmt.Fprintf(s.Stderr(), "sim guest: %v\n", err)
		_ = s.Exit(127)
		return
	}
	// Not waited for: the client may keep its stdin open after the
	// command ends; the copy stops when the session closes.
	go func() {
		_, _ = io.Copy(stdin, s)
		_ = stdin.Close()
	}()
	signals := make(chan ssh.Signal, 1)
	s.Signals(signals)
	exited := make(chan struct{})
	go func() {
		for {
			select {
			case sig := <-signals:
				if n, ok := signalNumbers[sig]; ok {
					_ = syscall.Kill(-cmd.Process.Pid, n)
				}
			case <-exited:
				return
			}
		}
	}()
	err = cmd.Wait()
	close(exited)
	code := 0
	switch {
	case cmd.ProcessState != nil && cmd.ProcessState.ExitCode() >= 0:
		code = cmd.ProcessState.ExitCode()
	case err != nil:
		code = 255 // killed by a signal
	}
	_ = s.Exit(code)
}

var signalNumbers = map[ssh.Signal]syscall.Signal{
	ssh.SIGINT: syscall.SIGINT, ssh.SIGTERM: syscall.SIGTERM, ssh.SIGKILL: syscall.SIGKILL,
	ssh.SIGHUP: syscall.SIGHUP, ssh.SIGQUIT: syscall.SIGQUIT, ssh.SIGUSR1: syscall.SIGUSR1, ssh.SIGUSR2: syscall.SIGUSR2,
}

// seedUsers reads the users and their authorized keys from a cloud-config
// user-data file, as cloud-init would create them. A file that is not
// cloud-config creates no users.
func seedUsers(userData string) (map[string][]gossh.PublicKey, error) {
	b, err := os.ReadFile(userData)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil // a guest nobody can log in to
	}
	if err != nil {
		return nil, err
	}
	if !bytes.HasPrefix(b, []byte("#cloud-config\n")) {
		return nil, nil
	}
	var cfg struct {
		Users []yaml.Node `yaml:"users"`
	}
	if err := yaml.Unmarshal(b, &cfg); err != nil {
		return nil, fmt.Errorf("user-data: %w", err)
	}
	out := map[string][]gossh.PublicKey{}
	for _, n := range cfg.Users {
		if n.Kind != yaml.MappingNode { // "default": the image's own user
			continue
		}
		var u struct {
			Name string   `yaml:"name"`
			Keys []string `yaml:"ssh_authorized_keys"`
		}
		if err := n.Decode(&u); err != nil {
			return nil, fmt.Errorf("user-data: %w", err)
		}
		for _, k := range u.Keys {
			pk, _, _, _, err := gossh.ParseAuthorizedKey([]byte(k))
			if err != nil {
				continue // cloud-init skips keys sshd would not read
			}
			out[u.Name] = append(out[u.Name], pk)
		}
		if _, ok := out[u.Name]; !ok {
			out[u.Name] = nil
		}
	}
	return out, nil
}

// loadOrMakeHostKey reads a guest's ed25519 host key, making it on first
// boot, so the guest keeps its identity across hostd restarts.
func loadOrMakeHostKey(path string) (gossh.Signer, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		_, priv, err := ed25519.GenerateKey(rand.Reader)
		if err != nil {
			return nil, err
		}
		block, err := gossh.MarshalPrivateKey(priv, "sim guest host key")
		if err != nil {
			return nil, err
		}
		b = pem.EncodeToMemory(block)
		if err := writeFileAtomic(path, b, 0o600); err != nil {
			return nil, fmt.Errorf("host key: %w", err)
		}
	} else if err != nil {
		return nil, fmt.Errorf("host key: %w", err)
	}
	s, err := gossh.ParsePrivateKey(b)
	if err != nil {
		return nil, fmt.Errorf("host key %s: %w", path, err)
	}
	return s, nil
}
