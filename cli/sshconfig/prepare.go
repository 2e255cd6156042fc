package sshconfig

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"time"

	"github.com/gpuaas/gpuaas/cli/cmdutil"
	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/clientconfig"
	"github.com/gpuaas/gpuaas/internal/sshconfig"
	"github.com/gpuaas/gpuaas/internal/sshkeys"
	"github.com/gpuaas/gpuaas/internal/trust"
)

// GatewayAuto given as --gateway forgets a stored override: the address
// controld publishes is used again.
const GatewayAuto = "auto"

// Env is what preparing the SSH files needs from the command.
type Env struct {
	IO     *cmdutil.IOStreams
	Config func() (*clientconfig.Config, error)
	Active func() (clientconfig.Active, error)
	Client func() (*api.Client, error)
	Now    func() time.Time
}

// EnvOf takes the Env from a Factory.
func EnvOf(f *cmdutil.Factory) Env {
	return Env{IO: f.IOStreams, Config: f.Config, Active: f.Active, Client: f.Client, Now: f.Now}
}

// Setup is the context's SSH files, current.
type Setup struct {
	Identity *sshkeys.Identity
	Paths    sshkeys.Paths
	Gateway  sshconfig.Gateway
	// Alias is the Host name of the gateway in the config.
	Alias string
	// Written reports that the config or known_hosts changed on disk.
	Written bool
}

// Prepare brings the active context's SSH files up to date: the key, a
// fresh certificate (renewed when needed), known_hosts with the gateway's
// host CA keys, and the config. The host CA keys and the gateway address
// come from the trust bundle of ssh.cas, checked against what the context
// pinned (internal/trust) before anything is written: a change not signed by
// the pinned server key is refused and leaves every file as it was.
// gatewayFlag, when not empty, overrides the gateway address and is stored
// in the context (GatewayAuto clears it).
func Prepare(ctx context.Context, env Env, gatewayFlag string) (*Setup, error) {
	if gatewayFlag != "" && gatewayFlag != GatewayAuto {
		if _, err := sshconfig.ParseGateway(gatewayFlag); err != nil {
			return nil, cmdutil.FlagErrorf("--gateway: %v", err)
		}
	}
	cfg, err := env.Config()
	if err != nil {
		return nil, err
	}
	active, err := env.Active()
	if err != nil {
		return nil, err
	}
	trusted, err := fetchTrusted(ctx, env, cfg, active)
	if err != nil {
		return nil, err
	}
	id, err := sshkeys.ForActive(cfg, active, env.Client, env.Now).Ensure(ctx)
	if err != nil {
		return nil, err
	}
	gw, err := resolveGateway(cfg, active, gatewayFlag, trusted.Statement.Gateway)
	if err != nil {
		return nil, err
	}
	knownHosts, err := sshconfig.RenderKnownHosts(gw, trusted.Statement.HostCAs)
	if err != nil {
		return nil, err
	}
	conf, err := sshconfig.RenderConfig(sshconfig.Params{Context: active.Name, Server: active.Server, Gateway: gw, Paths: id.Paths})
	if err != nil {
		return nil, err
	}
	s := &Setup{Identity: id, Paths: id.Paths, Gateway: gw, Alias: sshconfig.Alias(active.Name)}
	for _, f := range []struct {
		path string
		data []byte
	}{{id.Paths.KnownHosts, knownHosts}, {id.Paths.Config, conf}} {
		changed, err := writeIfChanged(f.path, f.data)
		if err != nil {
			return nil, err
		}
		s.Written = s.Written || changed
	}
	if trusted.Apply(cfg, active) {
		if err := cfg.Save(); err != nil {
			return nil, err
		}
		trusted.Report(env.IO.ErrOut, active.Name)
	}
	return s, nil
}

// fetchTrusted reads the server's SSH trust settings, checked against the
// context's pins.
func fetchTrusted(ctx context.Context, env Env, cfg *clientconfig.Config, active clientconfig.Active) (*trust.Fetched, error) {
	c, err := env.Client()
	if err != nil {
		return nil, err
	}
	return trust.Fetch(ctx, c, cfg, active, env.Now())
}

// resolveGateway picks the gateway address: --gateway (stored for next
// time), then the context's stored override, then what controld
// publishes.
func resolveGateway(cfg *clientconfig.Config, active clientconfig.Active, flag, published string) (sshconfig.Gateway, error) {
	stored := active.Gateway
	if flag != "" {
		stored = flag
		if flag == GatewayAuto {
			stored = ""
		}
		if stored != active.Gateway {
			cfg.UpdateActive(active, func(c *clientconfig.Context) { c.Gateway = stored })
			if err := cfg.Save(); err != nil {
				return sshconfig.Gateway{}, err
			}
		}
	}
	addr, from := stored, "the context's gateway (set with --gateway)"
	if addr == "" {
		addr, from = published, "controld's gateway address"
	}
	if addr == "" {
		return sshconfig.Gateway{}, ErrNoGateway
	}
	gw, err := sshconfig.ParseGateway(addr)
	if err != nil {
		return sshconfig.Gateway{}, fmt.Errorf("%s: %w", from, err)
	}
	return gw, nil
}

// writeIfChanged writes data to path (0600) unless it already holds it.
func writeIfChanged(path string, data []byte) (bool, error) {
	if old, err := os.ReadFile(path); err == nil && bytes.Equal(old, data) {
		return false, nil
	}
	if err := sshkeys.WriteFile(path, data, 0o600); err != nil {
		return false, fmt.Errorf("write %s: %w", path, err)
	}
	return true, nil
}
