package cmdutil

import (
	"time"

	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/clientconfig"
)

// Factory hands commands what they need, lazily: nothing is read or dialled
// until a command calls Config or Client. It is a plain struct of funcs:
// cli.NewFactory fills it for a run of the CLI (reading the config file,
// dialling the server), the gateway's command mode for a session over SSH
// (SSHCommands), and tests with what they need.
type Factory struct {
	IOStreams *IOStreams

	// Config loads the config file (once).
	Config func() (*clientconfig.Config, error)
	// Client connects to the active context's server (once) and returns a
	// client carrying its token and project.
	Client func() (*api.Client, error)
	// PreLoginClient connects like Client but never presents the stored
	// session: `gpuaas login` uses it, so a session that ended (or an
	// account that was disabled) does not stand in the way of logging in.
	// Nil where nobody logs in (over SSH).
	PreLoginClient func() (*api.Client, error)
	// Reconnect closes the connection Client opened and opens a new one
	// with the config as it is now (after a login stored a new session),
	// which Client then returns. Nil: login keeps the client it has.
	Reconnect func() (*api.Client, error)
	// Close closes the connections the client funcs opened (nil: they
	// opened none that outlive the command).
	Close func()
	// Now is the clock used for relative times and expiry.
	Now func() time.Time

	// Flags holds the global --context and --project flags. They win over
	// the GPUAAS_* environment, which wins over the file.
	Flags clientconfig.Overrides
	// Env returns the settings the environment overrides. Nil: this
	// process's GPUAAS_* variables (clientconfig.EnvOverrides). Over SSH
	// it is what the session sent, never the gateway's own environment.
	Env func() clientconfig.Overrides

	// CorrelationID is what every request of this invocation carries as
	// Gpuaas-Correlation-Id ("": none, controld assigns one per request);
	// Debug says it on stderr when a connection is made. See
	// InvocationCorrelation.
	CorrelationID string
	Debug         bool
}

// Active resolves the context a command runs against (flags, then
// environment, then the file).
func (f *Factory) Active() (clientconfig.Active, error) {
	cfg, err := f.Config()
	if err != nil {
		return clientconfig.Active{}, err
	}
	return cfg.Active(f.Overrides()), nil
}

// Overrides are the settings that win over the file's: the flags, then
// the environment.
func (f *Factory) Overrides() clientconfig.Overrides {
	env := clientconfig.EnvOverrides
	if f.Env != nil {
		env = f.Env
	}
	return env().Over(f.Flags)
}
