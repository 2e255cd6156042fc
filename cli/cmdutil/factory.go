package cmdutil

import (
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/gpuaas/gpuaas/cli/config"
	"github.com/gpuaas/gpuaas/internal/api"
)

// ConnectTimeout bounds dialling the server; a CLI should fail fast when
// nothing listens.
const ConnectTimeout = 3 * time.Second

// Factory hands commands what they need, lazily: nothing is read or dialled
// until a command calls Config or Client. Tests replace the funcs.
type Factory struct {
	IOStreams *IOStreams

	// Config loads the config file (once).
	Config func() (*config.Config, error)
	// Client connects to the active context's server (once) and returns a
	// client carrying its token and project.
	Client func() (*api.Client, error)
	// Now is the clock used for relative times and expiry.
	Now func() time.Time

	// Flags holds the global --context and --project flags. They win over
	// the GPUAAS_* environment, which wins over the file.
	Flags config.Overrides

	// mu protects conn.
	mu   sync.Mutex
	conn *nats.Conn
}

// New returns a Factory over ios that reads the config from config.Dir().
func New(ios *IOStreams) *Factory {
	f := &Factory{IOStreams: ios, Now: time.Now}
	f.Config = sync.OnceValues(config.LoadDefault)
	f.Client = sync.OnceValues(f.connect)
	return f
}

// Active resolves the context a command runs against (flags, then
// environment, then the file).
func (f *Factory) Active() (config.Active, error) {
	cfg, err := f.Config()
	if err != nil {
		return config.Active{}, err
	}
	return cfg.Active(f.overrides()), nil
}

func (f *Factory) overrides() config.Overrides {
	return config.EnvOverrides().Over(f.Flags)
}

// Close closes the connection Client opened, if any.
func (f *Factory) Close() {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.conn != nil {
		f.conn.Close()
		f.conn = nil
	}
}

func (f *Factory) connect() (*api.Client, error) {
	cfg, err := f.Config()
	if err != nil {
		return nil, err
	}
	o := f.overrides()
	active := cfg.Active(o)
	if o.Context != "" && !active.Exists && o.Server == "" {
		return nil, FlagErrorf("no context %q in %s (known: %s)", active.Name, cfg.Path(), strings.Join(cfg.ContextNames(), ", "))
	}
	opts := []nats.Option{nats.Name("gpuaas-cli"), nats.Timeout(ConnectTimeout)}
	if active.UserID != "" {
		opts = append(opts, nats.CustomInboxPrefix(api.UserInboxPrefix(active.UserID)))
	}
	nc, err := nats.Connect(active.Server, opts...)
	if err != nil {
		return nil, &api.Error{
			Code:    api.CodeUnavailable,
			Message: fmt.Sprintf("cannot connect to %s: %v", active.Server, err),
			Hint:    "is `gpuaas dev` or controld running? server is " + active.Server,
		}
	}
	f.mu.Lock()
	f.conn = nc
	f.mu.Unlock()
	return api.NewClient(nc, api.WithToken(active.Token), api.WithProject(active.Project)), nil
}
