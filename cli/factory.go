package cli

import (
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/gpuaas/gpuaas/cli/cmdutil"
	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/clientconfig"
	"github.com/gpuaas/gpuaas/internal/clientconn"
)

// NewFactory returns the factory of one run of the CLI over ios: it reads
// the config from clientconfig.Dir() and dials the active context's server
// (internal/clientconn) the first time a command asks for a client. The
// commands see only the funcs; this is the one place that fills them.
func NewFactory(ios *cmdutil.IOStreams) *cmdutil.Factory {
	f := &cmdutil.Factory{IOStreams: ios, Now: time.Now}
	f.CorrelationID, f.Debug = cmdutil.InvocationCorrelation(ios.ErrOut)
	f.Config = sync.OnceValues(clientconfig.LoadDefault)
	c := &conns{f: f}
	f.Client = sync.OnceValues(func() (*api.Client, error) { return c.dial(false) })
	f.PreLoginClient = func() (*api.Client, error) { return c.dial(true) }
	f.Reconnect = func() (*api.Client, error) {
		c.close()
		client, err := c.dial(false)
		f.Client = func() (*api.Client, error) { return client, err }
		return client, err
	}
	f.Close = c.close
	return f
}

// conns are the connections a factory's client funcs opened.
type conns struct {
	f *cmdutil.Factory

	// mu protects list.
	mu   sync.Mutex
	list []*nats.Conn
}

// dial connects as the active context (see clientconn.Dial); preLogin
// leaves the stored session out.
func (c *conns) dial(preLogin bool) (*api.Client, error) {
	f := c.f
	cfg, err := f.Config()
	if err != nil {
		return nil, err
	}
	o := f.Overrides()
	active := cfg.Active(o)
	if o.Context != "" && !active.Exists && o.Server == "" {
		return nil, cmdutil.FlagErrorf("no context %q in %s (known: %s)", active.Name, cfg.Path(), strings.Join(cfg.ContextNames(), ", "))
	}
	client, nc, err := clientconn.Dial(active, clientconn.Options{Now: f.Now(), PreLogin: preLogin, CorrelationID: f.CorrelationID})
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	c.list = append(c.list, nc)
	c.mu.Unlock()
	if f.Debug && f.CorrelationID != "" {
		_, _ = fmt.Fprintf(f.IOStreams.ErrOut, "debug: correlation id %s\n", f.CorrelationID)
	}
	return client, nil
}

// close closes the connections opened so far.
func (c *conns) close() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, nc := range c.list {
		nc.Close()
	}
	c.list = nil
}
