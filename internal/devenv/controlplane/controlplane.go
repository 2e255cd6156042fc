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
	"github.com/gpuaas/gpuaas/internal/gateproto"
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
	// Conns are controld's connections.
	Conns

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
	conns, err := ConnectControld(cfg.URL, cfg.TLS, cfg.Keys, logOpts...)
	if err != nil {
		return nil, err
	}
	cc := cfg.Controld
	cc.NATS, cc.APINATS, cc.SystemNATS, cc.BusKeys = conns.NC, conns.API, conns.Sys, cfg.Keys
	srv, err := controld.New(ctx, cc)
	if err != nil {
		conns.Close()
		return nil, err
	}
	runCtx, cancel := context.WithCancel(ctx)
	c := &Controld{Server: srv, Conns: conns, cancel: cancel, done: make(chan struct{})}
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
	c.Conns.Close()
	return c.err
}

// Conns are controld's NATS connections.
type Conns struct {
	// NC is its user in the app account with every permission there
	// (JetStream, events, tasks, the callout).
	NC *nats.Conn
	// API serves the API and the nodes' reports, and may publish only
	// to inboxes (bus.Keys.API); NC without keys.
	API *nats.Conn
	// Sys is its user in the system account (closing revoked
	// connections); nil without keys.
	Sys *nats.Conn
}

// Close closes the connections.
func (c Conns) Close() {
	for _, nc := range []*nats.Conn{c.NC, c.API, c.Sys} {
		if nc != nil {
			nc.Close()
		}
	}
}

// ConnectControld opens controld's three NATS connections: its users in
// the app account (everything but the API; the API) and in the system
// account. Without keys it opens only the first, with no credentials, and
// serves the API on it. extra go on every connection (bus.LogConnection).
func ConnectControld(url string, t bus.TLS, keys *bus.Keys, extra ...nats.Option) (Conns, error) {
	var c Conns
	tlsOpts, err := t.Options(url)
	if err != nil {
		return c, err
	}
	if keys == nil {
		c.NC, err = bus.Connect(url, "gpuaas-controld", append(tlsOpts, extra...)...)
		c.API = c.NC
		return c, err
	}
	for _, d := range []struct {
		conn  **nats.Conn
		name  string
		key   nkeys.KeyPair
		inbox string
	}{
		{&c.NC, "gpuaas-controld", keys.Controld, api.ControldInboxPrefix},
		{&c.API, "gpuaas-controld-api", keys.API, api.ControldAPIInboxPrefix},
		{&c.Sys, "gpuaas-controld-sys", keys.System, api.ControldInboxPrefix},
	} {
		inbox := nats.CustomInboxPrefix(d.inbox)
		if *d.conn, err = bus.Connect(url, d.name, withOpts(tlsOpts, bus.WithKey(d.key), inbox, extra)...); err != nil {
			c.Close()
			return Conns{}, err
		}
	}
	return c, nil
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
	opts, _, err := api.KeyConnOptions(key)
	if err != nil {
		return nil, fmt.Errorf("gateway key: %w", err)
	}
	return opts, nil
}

// GatewayClient is an API client on a gateway's connection nc that logs
// in to controld with the gateway's key for short-lived session tokens; no
// long-lived token exists.
func GatewayClient(nc *nats.Conn, key nkeys.KeyPair) (*api.Client, error) {
	login, err := gateproto.NewGatewayLogin(nc, key, nil)
	if err != nil {
		return nil, err
	}
	proof, err := api.ReplyProof(key)
	if err != nil {
		return nil, err
	}
	return api.NewClient(nc, api.WithTokenSource(login.Token), api.WithReplyProof(proof)), nil
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
