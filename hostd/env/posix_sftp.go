package env

import (
	"io"
	"sync"
	"syscall"

	"github.com/pkg/sftp"
)

// sftpInProcess serves sftp from hostd itself, starting in the account's
// home: for accounts that run as hostd's own user (the sim), where a
// process of its own would give the user nothing more or less.
func (p *posixEnv) sftpInProcess(spec ExecSpec) (Process, error) {
	rw, ok := spec.Stdin.(io.ReadWriteCloser)
	if !ok || any(spec.Stdout) != any(spec.Stdin) {
		rw = stdio{Reader: spec.Stdin, Writer: spec.Stdout}
	}
	srv, err := sftp.NewServer(rw, sftp.WithServerWorkingDirectory(p.acct.Home))
	if err != nil {
		return nil, err
	}
	return &inProcess{serve: srv.Serve, done: make(chan struct{})}, nil
}

// stdio joins a reader and a writer into an io.ReadWriteCloser.
type stdio struct {
	io.Reader
	io.Writer
}

func (stdio) Close() error { return nil }

// inProcess is a program hostd serves itself (sftp for the sim).
type inProcess struct {
	serve func() error
	done  chan struct{}
	once  sync.Once
	st    ExitStatus
}

// Wait implements Process: exit status 1 when serving failed.
func (ip *inProcess) Wait() ExitStatus {
	ip.once.Do(func() {
		if err := ip.serve(); err != nil {
			ip.st.Code = 1
		}
		close(ip.done)
	})
	return ip.st
}

// Signal implements Process: nothing to signal.
func (*inProcess) Signal(syscall.Signal) bool { return false }

// Resize implements Process.
func (*inProcess) Resize(uint32, uint32, uint32, uint32) error { return ErrNoPTY }

// Hangup implements Process: serving ends with its input.
func (*inProcess) Hangup() {}
