package env

import (
	"context"
	"fmt"
	"sync"
	"syscall"

	gossh "golang.org/x/crypto/ssh"

	"github.com/gpuaas/gpuaas/internal/sshwire"
)

// Exec implements Environment: a session on the VM's sshd, through the
// environment's shared hop.
func (v *vmEnv) Exec(ctx context.Context, spec ExecSpec) (Process, error) {
	c, err := v.shared(ctx)
	if err != nil {
		return nil, fmt.Errorf("exec in %s's VM: %w", v.alloc, err)
	}
	s, err := c.NewSession()
	if err != nil {
		return nil, fmt.Errorf("exec in %s's VM: %w", v.alloc, err)
	}
	pr, err := startVMSession(s, spec)
	if err != nil {
		_ = s.Close()
		return nil, fmt.Errorf("exec in %s's VM: %w", v.alloc, err)
	}
	return pr, nil
}

func startVMSession(s *gossh.Session, spec ExecSpec) (*vmProcess, error) {
	for _, kv := range spec.Env {
		name, value, _ := cutEnv(kv)
		// The VM's sshd accepts what its AcceptEnv allows; the rest is
		// refused without harm, as for a direct login.
		_ = s.Setenv(name, value)
	}
	if spec.PTY != nil && spec.Subsystem == "" {
		t := spec.PTY
		if err := requestPTY(s, t); err != nil {
			return nil, err
		}
	}
	s.Stdin, s.Stdout, s.Stderr = spec.Stdin, spec.Stdout, spec.Stderr
	var err error
	switch {
	case spec.Subsystem != "":
		err = s.RequestSubsystem(spec.Subsystem)
	case len(spec.Argv) > 0:
		err = s.Start(shellQuote(spec.Argv))
	case spec.Command != "":
		err = s.Start(spec.Command)
	default:
		err = s.Shell()
	}
	if err != nil {
		return nil, err
	}
	return &vmProcess{s: s, pty: spec.PTY != nil, done: make(chan struct{})}, nil
}

// requestPTY asks for a terminal with the client's encoded modes as they
// came (RFC 4254 section 6.2).
func requestPTY(s *gossh.Session, t *PTY) error {
	ok, err := s.SendRequest("pty-req", true, gossh.Marshal(sshwire.PtyRequestMsg{
		Term: t.Term, Columns: t.Columns, Rows: t.Rows, Width: t.Width, Height: t.Height, Modes: t.Modes,
	}))
	if err == nil && !ok {
		err = fmt.Errorf("%w: the VM refused a terminal", ErrUnsupported)
	}
	return err
}

func cutEnv(kv string) (name, value string, ok bool) {
	for i := 0; i < len(kv); i++ {
		if kv[i] == '=' {
			return kv[:i], kv[i+1:], true
		}
	}
	return kv, "", false
}

// shellQuote joins argv for the VM user's shell, each word in single
// quotes.
func shellQuote(argv []string) string {
	var b []byte
	for i, a := range argv {
		if i > 0 {
			b = append(b, ' ')
		}
		b = append(b, '\'')
		for j := 0; j < len(a); j++ {
			if a[j] == '\'' {
				b = append(b, `'\''`...)
				continue
			}
			b = append(b, a[j])
		}
		b = append(b, '\'')
	}
	return string(b)
}

// vmProcess is a session in the VM.
type vmProcess struct {
	s    *gossh.Session
	pty  bool
	done chan struct{}
	once sync.Once
	st   ExitStatus
}

// Wait implements Process: the VM's exit-status or exit-signal.
func (p *vmProcess) Wait() ExitStatus {
	p.once.Do(func() {
		err := p.s.Wait()
		_ = p.s.Close()
		p.st = vmExit(err)
		close(p.done)
	})
	return p.st
}

func vmExit(err error) ExitStatus {
	if err == nil {
		return ExitStatus{}
	}
	if ee, ok := err.(*gossh.ExitError); ok {
		if ee.Signal() != "" {
			if sig, known := sshwire.Signal(ee.Signal()); known {
				return ExitStatus{Signal: sig}
			}
		}
		return ExitStatus{Code: ee.ExitStatus()}
	}
	return ExitStatus{Code: 255}
}

// Signal implements Process: a signal request to the VM's sshd.
func (p *vmProcess) Signal(sig syscall.Signal) bool {
	select {
	case <-p.done:
		return false
	default:
	}
	name := sshwire.SignalName(sig)
	if name == "" {
		return false
	}
	return p.s.Signal(gossh.Signal(name)) == nil
}

// Resize implements Process.
func (p *vmProcess) Resize(columns, rows, _, _ uint32) error {
	if !p.pty {
		return ErrNoPTY
	}
	return p.s.WindowChange(int(rows), int(columns))
}

// Hangup implements Process: closing the session hangs up, as with sshd.
func (p *vmProcess) Hangup() { _ = p.s.Close() }
