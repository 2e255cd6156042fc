package cmdutil

import (
	"sync"

	"github.com/charmbracelet/ssh"
	"github.com/spf13/cobra"

	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/cmdmode"
)

// CommandTree builds the gpuaas command tree over f. The gateway's command
// mode calls it once per session: cobra commands keep flag state, so a
// tree is never shared.
type CommandTree func(f *Factory) *cobra.Command

// SSHCommands serves the gateway's command mode with the commands tree
// builds: a fresh tree per session, over a factory whose streams are the
// session's. What a command fails with is said on the session's stderr and
// mapped to its exit status, as Main does locally.
func SSHCommands(tree CommandTree) cmdmode.Server {
	return func(s *cmdmode.Session) int {
		f := sessionFactory(s)
		root := tree(f)
		root.SetArgs(s.Args)
		root.SetIn(f.IOStreams.In)
		root.SetOut(f.IOStreams.Out)
		root.SetErr(f.IOStreams.ErrOut)
		cmd, err := root.ExecuteContextC(s.SSH.Context())
		if err != nil {
			PrintError(s.ErrOut, cmd.CommandPath(), err)
		}
		return ExitCodeOf(err)
	}
}

// SSHDashboard serves the dashboard (`ssh -t gateway`, no command) with
// serve, over a factory acting as the session's user. s.Pty must be set.
func SSHDashboard(serve func(s ssh.Session, pty ssh.Pty, f *Factory) error) cmdmode.Server {
	return func(s *cmdmode.Session) int {
		err := serve(s.SSH, *s.Pty, sessionFactory(s))
		if err != nil {
			PrintError(s.ErrOut, "gpuaas", err)
		}
		return ExitCodeOf(err)
	}
}

// sessionFactory is the factory of a command mode session: its streams,
// config, environment and clock are the session's, and its client acts as
// the session's user.
func sessionFactory(s *cmdmode.Session) *Factory {
	tty := s.Pty != nil
	ios := &IOStreams{In: s.SSH, Out: s.Out, ErrOut: s.ErrOut}
	ios.SetStdinTTY(tty)
	ios.SetStdoutTTY(tty)
	ios.SetStderrTTY(tty)
	ios.SetNoColor(s.NoColor)
	f := &Factory{IOStreams: ios, Now: s.Now, Config: s.Config, Env: s.Env}
	// The client is made once the command line is parsed, so that
	// -p/--project (f.Flags) reaches it as it does locally.
	f.Client = sync.OnceValues(func() (*api.Client, error) {
		active, err := f.Active()
		if err != nil {
			return nil, err
		}
		return s.Client(active.Project)
	})
	return f
}
