package tasks

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"sync"
	"syscall"
	"time"

	hostenv "github.com/gpuaas/gpuaas/hostd/env"
	"github.com/gpuaas/gpuaas/hostd/workload"
)

// jobImageSignalTimeout bounds the podman command that delivers a signal
// into a job's container.
const jobImageSignalTimeout = 30 * time.Second

// jobImageProc is one phase's `podman exec`. Signals go to the
// container, not to the podman client: SIGKILL to the client would leave
// the phase running (its processes are conmon's, not the client's).
type jobImageProc struct {
	hostenv.Process
	ie *jobImageEnv
	// mu protects the following.
	mu   sync.Mutex
	sent syscall.Signal // the last signal delivered into the container
	done bool
}

// Signal delivers sig into the job's container: SIGKILL ends the
// container's init, and with it every process in it; any other signal
// goes to every process of the container but its init (`kill -1` in
// it), the job's processes, as SIGTERM reaches the job's process group
// without an image. false when the phase ended.
func (p *jobImageProc) Signal(sig syscall.Signal) bool {
	p.mu.Lock()
	if p.done {
		p.mu.Unlock()
		return false
	}
	p.sent = sig
	p.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), jobImageSignalTimeout)
	defer cancel()
	pm := workload.Podman{Env: p.ie.Environment}
	var err error
	if sig == syscall.SIGKILL {
		var r workload.Result
		if r, err = pm.Run(ctx, nil, "kill", "--signal", "KILL", p.ie.name); err == nil {
			err = r.Err("kill " + p.ie.name)
		}
	} else {
		name := strings.TrimPrefix(signalName(sig), "SIG")
		if strings.Contains(name, " ") {
			name = fmt.Sprint(int(sig))
		}
		err = p.ie.shell(ctx, "exec podman --runtime runc exec "+shellWord(p.ie.name)+
			" /bin/sh -c 'kill -s "+name+" -1 2>/dev/null; true'")
	}
	if err != nil {
		p.ie.env.Log.Warn("signal into the job's container", "job", p.ie.p.JobID, "signal", int(sig), "err", err)
		return true
	}
	return true
}

// Wait reports how the phase ended: podman exec exits 128+N for a
// process a signal N ended; when that signal is the one hostd delivered
// (a cancel or timeout), it is reported as the signal, as without an
// image. A SIGKILL of the container ends the exec with podman's own
// code, which is then the signal too.
func (p *jobImageProc) Wait() hostenv.ExitStatus {
	st := p.Process.Wait()
	p.mu.Lock()
	defer p.mu.Unlock()
	p.done = true
	switch {
	case p.sent == 0 || st.Signal != 0:
	case st.Code == 128+int(p.sent), p.sent == syscall.SIGKILL && st.Code != 0:
		return hostenv.ExitStatus{Signal: p.sent}
	}
	return st
}

// shell runs command by the renter's shell in the allocation's
// environment; an error names its output when it fails.
func (ie *jobImageEnv) shell(ctx context.Context, command string) error {
	var out bytes.Buffer
	var mu sync.Mutex
	w := writerFunc(func(b []byte) (int, error) {
		mu.Lock()
		defer mu.Unlock()
		if out.Len() < 64<<10 {
			out.Write(b)
		}
		return len(b), nil
	})
	proc, err := ie.Environment.Exec(ctx, hostenv.ExecSpec{Command: command, Stdout: w, Stderr: w})
	if err != nil {
		return err
	}
	done := make(chan hostenv.ExitStatus, 1)
	go func() { done <- proc.Wait() }()
	var st hostenv.ExitStatus
	select {
	case st = <-done:
	case <-ctx.Done():
		proc.Signal(syscall.SIGKILL)
		<-done
		return ctx.Err()
	}
	if st.Code != 0 || st.Signal != 0 {
		mu.Lock()
		defer mu.Unlock()
		msg := strings.TrimSpace(out.String())
		if lines := strings.Split(msg, "\n"); len(lines) > 3 {
			msg = strings.Join(lines[len(lines)-3:], "\n")
		}
		return fmt.Errorf("exit %d: %s", st.Code, msg)
	}
	return nil
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(b []byte) (int, error) { return f(b) }
