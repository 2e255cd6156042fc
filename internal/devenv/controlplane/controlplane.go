// Package controlplane runs controld on a NATS bus: its two connections,
// the server, and its run until stopped. It is the part of the platform
// that devenv (the whole platform on one machine) and controldtest
// (controld alone, for tests) share, and `gpuaas controld` and
// `gpuaas sshgate` connect to the bus with it.
//
// It imports nothing of sshgate's nor hostd's, so that their own tests
// can start a controld (through controldtest) without an import cycle.
package controlplane

import (
	"context"
	"crypto/ed25519"
	"errors"
	"fmt"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nkeys"

	"github.com/gpuaas/gpuaas/controld"
	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/bus"
)

// Config is a controld to run on a bus.
type Config struct {
	// URL of the NATS server(s). Required.
	URL string
	// TLS secures the connections to NATS.
	TLS bus.TLS
	// Keys are the bus's trust keys, controld's users among them. Nil
	// connects without credentials, to a bus without the trust model (the
	// baseline of the auth callout's benchmarks).
	Keys *bus.Keys
	// Controld is controld's configuration; Start sets its NATS,
	// SystemNATS and BusKeys.
	Controld controld.Config
}

// CheckAndSetDefaults fails on missing required fields.
func (c *Config) CheckAndSetDefaults() error {
	if c.URL == "" {
		return errors.New("controlplane: URL is required")
	}
	return nil
}

// Controld is a controld serving on a bus, until Stop.
type Controld struct {
	// Server is the running controld.
	Server *controld.Server
	// NC is controld's connection in the app account (every permission
	// there); Sys its connection in the system account (nil without
	// Keys).
	NC, Sys *nats.Conn

	cancel context.CancelFunc
	done   chan struct{}
	err    error // Run's result, set before done is closed
}

// Start connects controld to the bus, creates it and runs it until ctx
// ends or Stop; it returns once the API answers.
func Start(ctx context.Context, cfg Config) (*Controld, error) {
	if err := cfg.CheckAndSetDefaults(); err != nil {
		return nil, err
	}
	var logOpts []nats.Option
	if cfg.Controld.Log != nil {
		logOpts = append(logOpts, bus.LogConnection(cfg.Controld.Log))
	}
	nc, sys, err := ConnectControld(cfg.URL, cfg.TLS, cfg.Keys, logOpts...)
	if err != nil {
		return nil, err
	}
	cc := cfg.Controld
	cc.NATS, cc.SystemNATS, cc.BusKeys = nc, sys, cfg.Keys
	srv, err := controld.New(ctx, cc)
	if err != nil {
		closeConns(nc, sys)
		return nil, err
	}
	runCtx, cancel := context.WithCancel(ctx)
	c := &Controld{Server: srv, NC: nc, Sys: sys, cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(c.done)
		c.err = srv.Run(runCtx)
	}()
	select {
	case <-srv.Ready():
		return c, nil
	case <-c.done:
		err := c.Stop()
		if err == nil {
			err = errors.New("controld stopped before it served")
		}
		return nil, err
	}
}

// Done is closed when controld has stopped, by Stop or on its own; Err
// then says why.
func (c *Controld) Done() <-chan struct{} { return c.done }

// Err is what controld's run returned, once Done is closed.
func (c *Controld) Err() error {
	select {
	case <-c.done:
		return c.err
	default:
		return nil
	}
}

// Stop stops controld, waits for it and closes its connections. It
// returns the run's error, nil for a clean stop.
func (c *Controld) Stop() error {
	c.cancel()
	<-c.done
	closeConns(c.NC, c.Sys)
	return c.err
}

func closeConns(conns ...*nats.Conn) {
	for _, nc := range conns {
		if nc != nil {
			nc.Close()
		}
	}
}

// ConnectControld opens controld's two NATS connections: its user in the
// app account (the API, the callout, JetStream) and in the system account
// (closing revoked connections). Without keys it opens only the first,
// with no credentials. extra go on both connections (bus.LogConnection).
func ConnectControld(url string, t bus.TLS, keys *bus.Keys, extra ...nats.Option) (nc, sys *nats.Conn, err error) {
	tlsOpts, err := t.Options(url)
	if err != nil {
		return nil, nil, err
	}
	if keys == nil {
		nc, err = bus.Connect(url, "gpuaas-controld", append(tlsOpts, extra...)...)
		return nc, nil, err
	}
	inbox := nats.CustomInboxPrefix(api.ControldInboxPrefix)
	if nc, err = bus.Connect(url, "gpuaas-controld", withOpts(tlsOpts, bus.WithKey(keys.Controld), inbox, extra)...); err != nil {
		return nil, nil, err
	}
	if sys, err = bus.Connect(url, "gpuaas-controld-sys", withOpts(tlsOpts, bus.WithKey(keys.System), inbox, extra)...); err != nil {
		nc.Close()
		return nil, nil, err
	}
	return nc, sys, nil
}

// withOpts is tlsOpts, key, inbox and extra in a slice of its own (two
// connections are built from the same tlsOpts).
func withOpts(tlsOpts []nats.Option, key, inbox nats.Option, extra []nats.Option) []nats.Option {
	opts := append([]nats.Option{}, tlsOpts...)
	return append(append(opts, key, inbox), extra...)
}

// ConnectGateway connects as the gateway whose key is key and returns the
// connection and a client that logs in to controld with the same key
// (GatewayClient). extra go on the connection (bus.LogConnection).
func ConnectGateway(url string, t bus.TLS, key nkeys.KeyPair, extra ...nats.Option) (*nats.Conn, *api.Client, error) {
	tlsOpts, err := t.Options(url)
	if err != nil {
		return nil, nil, err
	}
	opts, err := GatewayOptions(key)
	if err != nil {
		return nil, nil, err
	}
	nc, err := bus.Connect(url, "gpuaas-sshgate", append(append(tlsOpts, opts...), extra...)...)
	if err != nil {
		return nil, nil, err
	}
	client, err := GatewayClient(nc, key)
	if err != nil {
		nc.Close()
		return nil, nil, err
	}
	return nc, client, nil
}

// GatewayOptions are the NATS options of a gateway's connection: its key
// proves it to the auth callout, and replies arrive on its own inbox.
func GatewayOptions(key nkeys.KeyPair) ([]nats.Option, error) {
	pub, err := key.PublicKey()
	if err != nil {
		return nil, fmt.Errorf("gateway key: %w", err)
	}
	return []nats.Option{bus.WithKey(key), nats.CustomInboxPrefix(api.InboxPrefix(pub))}, nil
}

// GatewayClient is an API client on a gateway's connection nc that logs
// in to controld with the gateway's key for short-lived session tokens; no
// long-lived token exists.
func GatewayClient(nc *nats.Conn, key nkeys.KeyPair) (*api.Client, error) {
	login, err := api.NewGatewayLogin(nc, key, nil)
	if err != nil {
		return nil, err
	}
	return api.NewClient(nc, api.WithTokenSource(login.Token)), nil
}

// GatewayKey is the Ed25519 private key of a gateway's nkey: the key it
// proves itself with to NATS, to controld (gate.login) and, certified by
// controld's internal CA, to hostd. Nil when kp holds no seed.
func GatewayKey(kp nkeys.KeyPair) ed25519.PrivateKey {
	seed, err := kp.Seed()
	if err != nil {
		return nil
	}
	_, raw, err := nkeys.DecodeSeed(seed)
	if err != nil || len(raw) != ed25519.SeedSize {
		return nil
	}
	return ed25519.NewKeyFromSeed(raw)
}
