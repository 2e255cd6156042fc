// Package cmdmode is what the SSH gateway's command mode hands to what
// serves it. `ssh gpuaas@gateway alloc list` runs a gpuaas command, and
// `ssh -t gpuaas@gateway` the dashboard, for the certificate's user: the
// gateway (sshgate) authenticates the user and fills a Session with the
// session's streams, the in-memory config its commands act in and a way to
// an API client acting as the user; the CLI (cli/cmdutil.SSHCommands and
// SSHDashboard) runs the command tree or the dashboard over it. Neither
// side imports the other: this package is all they share.
package cmdmode

import (
	"io"
	"time"

	"github.com/charmbracelet/ssh"

	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/clientconfig"
)

// Session is one session of command mode.
type Session struct {
	// SSH is the session: its context, standard input and environment.
	SSH ssh.Session
	// Pty is the session's PTY request, nil without one. The gateway
	// allocates no PTY itself, so SSH.Pty() does not report it.
	Pty *ssh.Pty
	// Out and ErrOut are the session's output streams; with a PTY they
	// return the carriage at each "\n" (the client's terminal is raw).
	Out, ErrOut io.Writer
	// NoColor is set when the client asked for none (NO_COLOR, TERM=dumb).
	NoColor bool
	// Args is the command line, without the program name.
	Args []string

	// Config is the config the commands act in: in memory, with no path,
	// so nothing a command does can write the gateway's files.
	Config func() (*clientconfig.Config, error)
	// Env is what stands for the user's environment: what the session
	// sent, never the gateway's own.
	Env func() clientconfig.Overrides
	// Now is the clock of relative times and expiry.
	Now func() time.Time
	// Client returns an API client acting as the user in project ("": the
	// user's default project).
	Client func(project string) (*api.Client, error)
}

// Server serves s and returns its exit status.
type Server func(s *Session) int
