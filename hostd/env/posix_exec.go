package env

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	"github.com/gpuaas/gpuaas/hostd/env/ptyctl"
	"github.com/gpuaas/gpuaas/internal/sshwire"
)

// sessionPath is the PATH of session processes, the user's ~/.local/bin
// last (sessionPATH); a login shell sets its own from /etc/profile and
// ~/.profile, which on Debian adds ~/.local/bin too.
const sessionPath = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

// sessionPATH is the PATH of a session of the account with home home: a
// command run without a login shell (`ssh ID@gateway nvidia-smi`) finds
// what a login shell would, the tools in ~/.local/bin among them (the
// simulated nvidia-smi, a pip --user install).
func sessionPATH(home string) string { return sessionPath + ":" + home + "/.local/bin" }

// ptyDrain is how long a PTY session's output is still read after its
// process exited, for a background job that keeps the terminal open.
const ptyDrain = 2 * time.Second

// Exec implements Environment: the program runs as the account (uid,
// gid, supplementary groups), in its home (or / when that is missing, as
// sshd does), in a session of its own, with a PTY when asked, isolated as
// the account says (host.Isolation). The login shell is "-bash" style;
// Command runs through "$SHELL -c". sftp is the system's sftp-server run
// as the account, or served in-process for an account run as hostd
// itself (the sim).
func (p *posixEnv) Exec(_ context.Context, spec ExecSpec) (Process, error) {
	a := p.acct
	var cmd *exec.Cmd
	switch {
	case spec.Subsystem == "sftp":
		if a.Credential == nil {
			return p.sftpInProcess(spec)
		}
		if p.f.cfg.SFTPServer == "" {
			return nil, ErrNoSFTPServer
		}
		spec.PTY = nil // sftp-server speaks binary: never through a terminal
		cmd = &exec.Cmd{Path: p.f.cfg.SFTPServer, Args: []string{"sftp-server"}}
	case spec.Subsystem != "":
		return nil, fmt.Errorf("%w: subsystem %q", ErrInvalidSpec, spec.Subsystem)
	case len(spec.Argv) > 0:
		path, err := lookPath(spec.Argv[0], sessionPATH(a.Home))
		if err != nil {
			return nil, fmt.Errorf("exec %s: %w", spec.Argv[0], err)
		}
		cmd = &exec.Cmd{Path: path, Args: spec.Argv}
	case spec.Command != "":
		cmd = &exec.Cmd{Path: a.Shell, Args: []string{filepath.Base(a.Shell), "-c", spec.Command}}
	default:
		cmd = &exec.Cmd{Path: a.Shell, Args: []string{"-" + filepath.Base(a.Shell)}}
	}
	cmd.Env = p.environ(spec)
	cmd.Dir = a.Home
	if fi, err := os.Stat(a.Home); err != nil || !fi.IsDir() {
		cmd.Dir = "/"
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Credential: a.Credential}
	if a.Isolation != nil {
		if err := a.Isolation.Isolate(cmd, a.Credential, spec.AgentSocket); err != nil {
			return nil, err
		}
	}
	if spec.PTY != nil {
		return p.startPTY(cmd, spec)
	}
	return startPipes(cmd, spec)
}

// lookPath finds file on path, as a shell would; a name with a slash is
// taken as is.
func lookPath(file, path string) (string, error) {
	if filepath.Base(file) != file {
		return file, nil
	}
	for _, dir := range filepath.SplitList(path) {
		f := filepath.Join(dir, file)
		if fi, err := os.Stat(f); err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0 {
			return f, nil
		}
	}
	return "", exec.ErrNotFound
}

// environ is the program's environment: the account's, then TERM from the
// PTY request, then the caller's variables (later entries win in
// os/exec), then the forwarded agent's socket.
func (p *posixEnv) environ(spec ExecSpec) []string {
	a := p.acct
	env := []string{"HOME=" + a.Home, "USER=" + a.Name, "LOGNAME=" + a.Name, "SHELL=" + a.Shell, "PATH=" + sessionPATH(a.Home)}
	if spec.PTY != nil && spec.PTY.Term != "" {
		env = append(env, "TERM="+spec.PTY.Term)
	}
	env = append(env, spec.Env...)
	if spec.AgentSocket != "" {
		env = append(env, sshwire.AgentSocketEnv+"="+spec.AgentSocket)
	}
	return env
}

// posixProcess is a program started by Exec.
type posixProcess struct {
	cmd  *exec.Cmd
	pid  int      // the process (and process group) id
	ptmx *os.File // the PTY's master side, nil without one
	wait func()   // waits for the program and its output
	done chan struct{}

	once sync.Once
	st   ExitStatus
}

func startPipes(cmd *exec.Cmd, spec ExecSpec) (Process, error) {
	var stdin io.WriteCloser
	if spec.Stdin != nil {
		var err error
		if stdin, err = cmd.StdinPipe(); err != nil {
			return nil, err
		}
	}
	// os/exec copies the output pipes into the writers with io.Copy; an
	// SSH channel's window holds the program back when its client reads
	// slowly.
	cmd.Stdout, cmd.Stderr = spec.Stdout, spec.Stderr
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	pr := &posixProcess{cmd: cmd, pid: cmd.Process.Pid, done: make(chan struct{})}
	pr.wait = func() {
		if stdin != nil {
			// Not waited for: the copy ends when the input does (or at
			// the first write after the program closed its stdin).
			go func() {
				_, _ = io.Copy(stdin, spec.Stdin)
				_ = stdin.Close()
			}()
		}
		awaitExit(cmd.Process.Pid)
		_ = cmd.Wait()
	}
	return pr, nil
}

func (p *posixEnv) startPTY(cmd *exec.Cmd, spec ExecSpec) (Process, error) {
	ptmx, tty, err := ptyctl.Open()
	if err != nil {
		return nil, err
	}
	defer tty.Close()
	t := spec.PTY
	if err := applyModes(tty, t.Modes); err != nil {
		p.f.cfg.Log.Debug("terminal modes not applied", "err", err)
	}
	if err := ptyctl.SetWinsize(ptmx, t.Columns, t.Rows, t.Width, t.Height); err != nil {
		_ = ptmx.Close()
		return nil, err
	}
	if cred := p.acct.Credential; cred != nil {
		// As sshd does: the terminal belongs to the user (mesg, write and
		// programs that reopen /dev/tty need it).
		if err := chownTTY(tty, cred); err != nil {
			_ = ptmx.Close()
			return nil, err
		}
	}
	cmd.Stdin, cmd.Stdout, cmd.Stderr = tty, tty, tty
	cmd.SysProcAttr.Setctty = true
	cmd.SysProcAttr.Ctty = 0 // the child's stdin
	if err := cmd.Start(); err != nil {
		_ = ptmx.Close()
		return nil, err
	}
	pr := &posixProcess{cmd: cmd, pid: cmd.Process.Pid, ptmx: ptmx, done: make(chan struct{})}
	pr.wait = func() {
		out := make(chan struct{})
		go func() {
			if spec.Stdout != nil {
				_, _ = copyPTY(spec.Stdout, ptmx)
			} else {
				_, _ = copyPTY(io.Discard, ptmx)
			}
			close(out)
		}()
		if spec.Stdin != nil {
			go func() { _, _ = copyPTY(ptmx, spec.Stdin) }()
		}
		awaitExit(cmd.Process.Pid)
		_ = cmd.Wait()
		select {
		case <-out: // the last holder of the terminal closed it
		case <-time.After(ptyDrain):
		}
		_ = ptmx.Close()
		<-out
	}
	return pr, nil
}

// copyPTY copies src to dst with sshwire.Copy: the copies each way between
// a PTY and its channel last the whole session, idle or not, and an idle
// one holds a small buffer, a full one only while data flows
// (sshgate's BenchmarkIdleSessions). It never uses an *os.File's ReadFrom
// or WriteTo, which would allocate their own 32 KiB.
func copyPTY(dst io.Writer, src io.Reader) (int64, error) {
	return sshwire.Copy(dst, src)
}

// Wait implements Process.
func (pr *posixProcess) Wait() ExitStatus {
	pr.once.Do(func() {
		pr.wait()
		pr.st = exitStatus(pr.cmd.ProcessState)
		close(pr.done)
	})
	return pr.st
}

// exitStatus is how a program ended, from its state.
func exitStatus(st *os.ProcessState) ExitStatus {
	if st == nil {
		return ExitStatus{Code: 255}
	}
	ws, _ := st.Sys().(syscall.WaitStatus)
	if ws.Signaled() {
		return ExitStatus{Signal: ws.Signal(), CoreDumped: ws.CoreDump()}
	}
	return ExitStatus{Code: st.ExitCode()}
}

// Signal implements Process: to the program's process group; with a PTY,
// to the terminal's foreground process group (the job the user is
// running), which is what a key press would reach.
func (pr *posixProcess) Signal(sig syscall.Signal) bool {
	select {
	case <-pr.done:
		return false
	default:
	}
	pgid := pr.pid
	if pr.ptmx != nil {
		if fg, err := ptyctl.ForegroundGroup(pr.ptmx); err == nil && fg > 0 {
			pgid = fg
		}
	}
	return syscall.Kill(-pgid, sig) == nil
}

// Resize implements Process.
func (pr *posixProcess) Resize(columns, rows, width, height uint32) error {
	if pr.ptmx == nil {
		return ErrNoPTY
	}
	return ptyctl.SetWinsize(pr.ptmx, columns, rows, width, height)
}

// Hangup implements Process: a program still running is hung up on, as
// by a closed terminal (background jobs that ignore SIGHUP live on, as
// with sshd).
func (pr *posixProcess) Hangup() {
	select {
	case <-pr.done:
		return
	default:
	}
	_ = syscall.Kill(-pr.pid, syscall.SIGHUP)
	if pr.ptmx != nil {
		_ = pr.ptmx.Close()
	}
}
