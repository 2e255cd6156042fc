package cmdutil

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nkeys"

	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/bus"
	"github.com/gpuaas/gpuaas/internal/clientconfig"
)

// ConnectTimeout bounds dialling the server; a CLI should fail fast when
// nothing listens.
const ConnectTimeout = 3 * time.Second

// Factory hands commands what they need, lazily: nothing is read or dialled
// until a command calls Config or Client. Tests replace the funcs.
type Factory struct {
	IOStreams *IOStreams

	// Config loads the config file (once).
	Config func() (*clientconfig.Config, error)
	// Client connects to the active context's server (once) and returns a
	// client carrying its token and project.
	Client func() (*api.Client, error)
	// Now is the clock used for relative times and expiry.
	Now func() time.Time

	// Flags holds the global --context and --project flags. They win over
	// the GPUAAS_* environment, which wins over the file.
	Flags clientconfig.Overrides
	// Env returns the settings the environment overrides. Nil: this
	// process's GPUAAS_* variables (clientconfig.EnvOverrides). Over SSH it is
	// what the session sent, never the gateway's own environment.
	Env func() clientconfig.Overrides

	// CorrelationID is what every request of this invocation carries as
	// Gpuaas-Correlation-Id ("": none, controld assigns one per request);
	// Debug says it on stderr when a connection is made. See
	// InvocationCorrelation.
	CorrelationID string
	Debug         bool

	// mu protects conns.
	mu    sync.Mutex
	conns []*nats.Conn
}

// New returns a Factory over ios that reads the config from clientconfig.Dir().
func New(ios *IOStreams) *Factory {
	f := &Factory{IOStreams: ios, Now: time.Now}
	f.CorrelationID, f.Debug = InvocationCorrelation(ios.ErrOut)
	f.Config = sync.OnceValues(clientconfig.LoadDefault)
	f.Client = sync.OnceValues(f.connect)
	return f
}

// Active resolves the context a command runs against (flags, then
// environment, then the file).
func (f *Factory) Active() (clientconfig.Active, error) {
	cfg, err := f.Config()
	if err != nil {
		return clientconfig.Active{}, err
	}
	return cfg.Active(f.overrides()), nil
}

func (f *Factory) overrides() clientconfig.Overrides {
	env := clientconfig.EnvOverrides
	if f.Env != nil {
		env = f.Env
	}
	return env().Over(f.Flags)
}

// Close closes the connections Client and PreLoginClient opened.
func (f *Factory) Close() {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, nc := range f.conns {
		nc.Close()
	}
	f.conns = nil
}

// Reconnect closes the connection Client opened and opens a new one with
// the config as it is now (after a login stored a new session), which
// Client then returns.
func (f *Factory) Reconnect() (*api.Client, error) {
	f.Close()
	c, err := f.connect()
	f.Client = func() (*api.Client, error) { return c, err }
	return c, err
}

// identity is how the connection proves who it is (see docs/architecture.md,
// "Trust model"): the session token when there is one that has not expired,
// its replies read on the user's own inbox; else a key made for this
// connection, which may only reach the login endpoints and read its own
// inbox, so nobody else on the bus can read a password's reply.
//
// A key's connection proves the key with each request too
// (api.WithReplyProof), so controld answers on its inbox.
func (f *Factory) identity(active clientconfig.Active) (opts []nats.Option, proof api.ClientOption, withSession bool) {
	if opts, ok := api.SessionConnOptions(active.Token); ok &&
		(active.TokenExpiresAt.IsZero() || f.Now().Before(active.TokenExpiresAt)) {
		return opts, func(*api.Client) {}, true
	}
	kp, err := nkeys.CreateUser()
	if err != nil {
		return nil, func(*api.Client) {}, false
	}
	opts, p, err := api.KeyConnOptions(kp)
	if err != nil {
		return nil, func(*api.Client) {}, false
	}
	return opts, api.WithReplyProof(p), false
}

// refusedConnection reports whether the server refused the connection's
// credentials (errors from the handshake are not always wrapped).
func refusedConnection(err error) bool {
	if errors.Is(err, nats.ErrAuthorization) || errors.Is(err, nats.ErrAuthExpired) || errors.Is(err, nats.ErrAuthRevoked) {
		return true
	}
	msg := strings.ToLower(err.Error())
	return strings.Contains(msg, "authorization violation") || strings.Contains(msg, "authentication expired") ||
		strings.Contains(msg, "authentication revoked")
}

// connectError explains a failed connection: a refused session means log
// in again; anything else, check the server.
func connectError(server string, withSession bool, err error) error {
	if refusedConnection(err) {
		if withSession {
			return &api.Error{Code: api.CodeUnauthenticated,
				Message: "the server refused your session: it has ended, was logged out, or the account is disabled",
				Hint:    "run `gpuaas login`"}
		}
		return &api.Error{Code: api.CodeUnauthenticated, Message: fmt.Sprintf("the server at %s refused the connection: %v", server, err),
			Hint: "check the server in your config (`gpuaas context list`)"}
	}
	return &api.Error{
		Code:    api.CodeUnavailable,
		Message: fmt.Sprintf("cannot connect to %s: %v", server, err),
		Hint:    "is `gpuaas dev` or controld running? server is " + server,
	}
}

func (f *Factory) connect() (*api.Client, error) { return f.dial(false) }

// PreLoginClient connects like Client but never presents the stored
// session: `gpuaas login` uses it, so a session that ended (or an account
// that was disabled) does not stand in the way of logging in, and the
// server's answer to the login is what the user sees.
func (f *Factory) PreLoginClient() (*api.Client, error) { return f.dial(true) }

func (f *Factory) dial(preLogin bool) (*api.Client, error) {
	cfg, err := f.Config()
	if err != nil {
		return nil, err
	}
	o := f.overrides()
	active := cfg.Active(o)
	if o.Context != "" && !active.Exists && o.Server == "" {
		return nil, FlagErrorf("no context %q in %s (known: %s)", active.Name, cfg.Path(), strings.Join(cfg.ContextNames(), ", "))
	}
	tlsOpts, err := bus.TLS{CAPEM: []byte(active.NATSCA), AllowPlaintext: active.NATSInsecurePlaintext}.Options(active.Server)
	if err != nil {
		return nil, &api.Error{Code: api.CodeInvalidArgument, Message: err.Error(),
			Hint: "`gpuaas context add NAME --server URL --ca FILE` stores the server's CA"}
	}
	opts := append([]nats.Option{nats.Name("gpuaas-cli"), nats.Timeout(ConnectTimeout)}, tlsOpts...)
	identity := active
	if preLogin {
		identity.Token = ""
	}
	idOpts, proof, withSession := f.identity(identity)
	nc, err := nats.Connect(active.Server, append(opts, idOpts...)...)
	if err != nil {
		return nil, connectError(active.Server, withSession, err)
	}
	f.mu.Lock()
	f.conns = append(f.conns, nc)
	f.mu.Unlock()
	if f.Debug && f.CorrelationID != "" {
		_, _ = fmt.Fprintf(f.IOStreams.ErrOut, "debug: correlation id %s\n", f.CorrelationID)
	}
	return api.NewClient(nc, api.WithToken(active.Token), api.WithProject(active.Project),
		api.WithCorrelation(f.CorrelationID), proof), nil
}
