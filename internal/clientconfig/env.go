package clientconfig

import (
	"errors"
	"os"
	"path/filepath"
)

// Environment variables the CLI honours.
const (
	EnvConfigDir = "GPUAAS_CONFIG_DIR"
	EnvServer    = "GPUAAS_SERVER"
	EnvToken     = "GPUAAS_TOKEN"
	EnvProject   = "GPUAAS_PROJECT"
	EnvContext   = "GPUAAS_CONTEXT"
	// EnvCorrelationID is the correlation id this invocation's requests
	// carry (default: a fresh one), and EnvDebug, when set, has the CLI
	// say it on stderr.
	EnvCorrelationID = "GPUAAS_CORRELATION_ID"
	EnvDebug         = "GPUAAS_DEBUG"
)

// Dir returns the config directory: $GPUAAS_CONFIG_DIR, else
// $XDG_CONFIG_HOME/gpuaas, else ~/.config/gpuaas.
func Dir() (string, error) {
	if d := os.Getenv(EnvConfigDir); d != "" {
		return d, nil
	}
	if d := os.Getenv("XDG_CONFIG_HOME"); d != "" {
		return filepath.Join(d, "gpuaas"), nil
	}
	home, err := os.UserHomeDir()
	if err != nil || home == "" {
		return "", errors.New("no config directory: set " + EnvConfigDir + " or HOME")
	}
	return filepath.Join(home, ".config", "gpuaas"), nil
}

// LoadDefault loads the config from Dir().
func LoadDefault() (*Config, error) {
	dir, err := Dir()
	if err != nil {
		return nil, err
	}
	return Load(dir)
}

// Overrides are settings that win over the config file. Empty fields
// override nothing.
type Overrides struct {
	Context string
	Server  string
	Token   string
	Project string
}

// EnvOverrides reads GPUAAS_CONTEXT, GPUAAS_SERVER, GPUAAS_TOKEN and
// GPUAAS_PROJECT.
func EnvOverrides() Overrides {
	return Overrides{
		Context: os.Getenv(EnvContext),
		Server:  os.Getenv(EnvServer),
		Token:   os.Getenv(EnvToken),
		Project: os.Getenv(EnvProject),
	}
}

// Over returns o with every non-empty field of higher taking precedence.
func (o Overrides) Over(higher Overrides) Overrides {
	pick := func(lo, hi string) string {
		if hi != "" {
			return hi
		}
		return lo
	}
	return Overrides{
		Context: pick(o.Context, higher.Context),
		Server:  pick(o.Server, higher.Server),
		Token:   pick(o.Token, higher.Token),
		Project: pick(o.Project, higher.Project),
	}
}

// Active is the context a command runs against: the named context from
// the file with overrides applied and defaults filled in.
type Active struct {
	// Name is the context's name; it need not exist in the file yet.
	Name string
	// Exists reports whether the file has a context called Name.
	Exists bool
	Context
}

// Active resolves the context to use. The name comes from o.Context, then
// the file's current context, then DefaultContextName; o's other fields
// replace the stored ones; the server defaults to DefaultServer.
func (c *Config) Active(o Overrides) Active {
	name := o.Context
	if name == "" {
		name = c.CurrentContext
	}
	if name == "" {
		name = DefaultContextName
	}
	ctx, ok := c.Contexts[name]
	if o.Server != "" {
		ctx.Server = o.Server
	}
	if o.Token != "" {
		ctx.Token = o.Token
	}
	if o.Project != "" {
		ctx.Project = o.Project
	}
	if ctx.Server == "" {
		ctx.Server = DefaultServer
	}
	return Active{Name: name, Exists: ok, Context: ctx}
}
