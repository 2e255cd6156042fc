// Package env is where a renter's processes run: an Environment per
// allocation, modelled on nomad's task drivers. hostd/term serves the SSH
// protocol (channels, requests, tickets) and asks the allocation's
// Environment to run processes, reach its loopback and hop into it;
// hostd/tasks provisions and releases through it. Two kinds today:
//
//   - posix (bare metal): the allocation's POSIX user on the node; its
//     processes run as the account, isolated as the account says
//     (host.Isolation), and its loopback is the node's.
//   - vm (slice): the allocation's VM, reached through an SSH hop with
//     the per-VM key (pinned host key, see pin.go); a later libvirt guest
//     agent can implement the same interface without the hop.
//
// Factory.Open is the one place in hostd that reads an allocation's shape
// (see layout_test.go for the list of files allowed to name it).
package env

import (
	"context"
	"io"
	"net"
	"syscall"

	gossh "golang.org/x/crypto/ssh"

	"github.com/gpuaas/gpuaas/hostd/host"
)

// Kinds of Environment, as Status reports them.
const (
	KindPOSIX = "posix"
	KindVM    = "vm"
)

// Environment is where one allocation's processes run.
type Environment interface {
	// Exec starts a process in the environment as the allocation's user.
	Exec(ctx context.Context, spec ExecSpec) (Process, error)
	// DialLoopback opens a TCP connection to port on the environment's
	// loopback; host names which loopback ("localhost", 127.0.0.0/8,
	// ::1; empty is 127.0.0.1). Other hosts are an ErrNotLoopback.
	DialLoopback(ctx context.Context, host string, port int) (net.Conn, error)
	// Attach makes a directory or device of the node available in the
	// environment under m.Name; Detach removes it.
	Attach(ctx context.Context, m Mount) error
	Detach(ctx context.Context, name string) error
	// Status reports whether the environment is there and usable.
	Status(ctx context.Context) (Status, error)
	// Close ends what the environment holds for its user (connections
	// into a VM); processes started by Exec are not ended.
	Close() error
}

// Hopper is implemented by environments that are themselves SSH servers
// (the VM's sshd): hostd/term relays a client's channels and requests
// into them one for one, so the guest's sshd applies its own policy to
// PTYs, agent and remote forwarding as it would for a direct login.
type Hopper interface {
	// Hop opens a new SSH connection into the environment as its user.
	Hop(ctx context.Context) (gossh.Conn, <-chan gossh.NewChannel, <-chan *gossh.Request, error)
}

// ExecSpec is a process to run. Exactly one of Argv, Command, Subsystem,
// or none of them for the user's login shell.
type ExecSpec struct {
	// Argv is a program and its arguments, found on the session's PATH.
	Argv []string
	// Command is run by the user's shell ("$SHELL -c Command").
	Command string
	// Subsystem is an SSH subsystem; only "sftp".
	Subsystem string
	// Env are extra variables (NAME=value), after the user's own.
	Env []string
	// PTY, when set, runs the process on a terminal of this size.
	PTY *PTY
	// AgentSocket is a forwarded SSH agent's socket, set as
	// SSH_AUTH_SOCK and kept visible through the user's isolation.
	AgentSocket string
	// Stdin, Stdout and Stderr are the process's streams; nil is empty
	// input or discarded output. With a PTY, Stderr is not used. When
	// Stdin ends, the process's input is closed.
	Stdin          io.Reader
	Stdout, Stderr io.Writer
}

// PTY is a terminal request: RFC 4254 section 6.2's fields.
type PTY struct {
	Term                         string
	Columns, Rows, Width, Height uint32
	// Modes are the encoded terminal modes (RFC 4254 section 8).
	Modes string
}

// Process is a running process of an environment.
type Process interface {
	// Wait waits for the process to end and its output to be copied,
	// and reports how it ended. A terminal's streams are copied from the
	// first call of Wait on, so a caller that must answer a request
	// before output flows (SSH's reply to exec) calls Wait after
	// answering; call it once the process runs, or it blocks on its
	// terminal.
	Wait() ExitStatus
	// Signal delivers sig to the process group (with a PTY, to the
	// terminal's foreground job); false when it has ended.
	Signal(sig syscall.Signal) bool
	// Resize changes the terminal's size; an error without a PTY.
	Resize(columns, rows, width, height uint32) error
	// Hangup tells the process its terminal went away (SIGHUP to its
	// group), as a closed SSH channel does.
	Hangup()
}

// ExitStatus is how a process ended: Signal is non-zero when a signal
// ended it, else Code is its exit code (255 when unknown).
type ExitStatus struct {
	Code       int
	Signal     syscall.Signal
	CoreDumped bool
}

// Mount is something of the node attached into an environment.
type Mount struct {
	// Name is where it appears: a single path element, under the user's
	// home for posix.
	Name string
	// Source is the node's directory (or block device).
	Source string
	// ReadOnly asks for a read-only attachment.
	ReadOnly bool
	// Path is where a VM mounts the device, an absolute path in the
	// guest (api.CheckMountPath); Name is then the disk's serial, the
	// volume id (vm_attach.go). Posix environments ignore it.
	Path string
}

// Status is an environment's state.
type Status struct {
	Kind string // KindPOSIX or KindVM
	// Ready: the account exists / the VM runs.
	Ready bool
	// Detail says what is known: the VM's domain state, the user's home.
	Detail string
}

// Account is who a posix environment's processes run as.
type Account struct {
	Name  string
	Home  string
	Shell string
	// Credential is the uid, gid and supplementary groups the processes
	// get; nil runs them as hostd itself (the sim), which also serves
	// sftp in-process.
	Credential *syscall.Credential
	// Isolation, when not nil, is what the processes are put in (private
	// /tmp, /var/tmp and /dev/shm, an IPC namespace of their own, a
	// higher OOM score): host.Isolation.Isolate.
	Isolation *host.Isolation
}

// Accounts finds the POSIX account of a bare-metal allocation.
type Accounts interface {
	// Lookup returns the account; an error wrapping a "no account"
	// sentinel of the implementation when there is none (or it is one
	// a session must never run as, such as root).
	Lookup(ctx context.Context, name string) (Account, error)
}
