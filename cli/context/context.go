// Package context holds `gpuaas context` and its verbs: the named servers
// in the config file, which one is current, and what each trusts about its
// server. They touch only the config file; `trust --reset` alone asks the
// server.
package context

import (
	"fmt"
	"net"
	"net/url"
	"strings"

	"github.com/spf13/cobra"

	"github.com/gpuaas/gpuaas/cli/cmdutil"
	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/clientconfig"
)

// NewCmdContext builds `gpuaas context`.
func NewCmdContext(f *cmdutil.Factory) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "context <command>",
		Short: "Manage the servers in the config: list, add, use, remove, trust",
		Long: `A context is a named server with the session, default project and SSH
gateway used with it. Commands run against the current context; --context
NAME or GPUAAS_CONTEXT=NAME picks another for one command or one shell.`,
	}
	cmd.AddCommand(
		NewCmdList(f, nil),
		NewCmdUse(f, nil),
		NewCmdAdd(f, nil),
		NewCmdRemove(f, nil),
		NewCmdTrust(f, nil),
	)
	return cmd
}

// unknownContext is the error for a name the config does not have.
func unknownContext(cfg *clientconfig.Config, name string) error {
	known := "none; add one with `gpuaas context add NAME --server URL`"
	if names := cfg.ContextNames(); len(names) > 0 {
		known = strings.Join(names, ", ")
	}
	return &api.Error{Code: api.CodeNotFound, Message: fmt.Sprintf("no context %q in %s", name, cfg.Path()),
		Hint: "known contexts: " + known}
}

// validName keeps context names usable as directory names (the SSH keys
// live under the config directory, one directory per context) and in
// shells.
func validName(name string) error {
	if name == "" || len(name) > 64 || strings.HasPrefix(name, ".") || strings.HasPrefix(name, "-") {
		return cmdutil.FlagErrorf("%q is not a valid context name: use 1–64 letters, digits, '.', '_' and '-', not starting with '.' or '-'", name)
	}
	for _, r := range name {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '.' || r == '_' || r == '-') {
			return cmdutil.FlagErrorf("%q is not a valid context name: use 1–64 letters, digits, '.', '_' and '-', not starting with '.' or '-'", name)
		}
	}
	return nil
}

// validServer checks a NATS server list: comma-separated URLs with a NATS
// scheme and a host.
func validServer(server string) error {
	for _, s := range strings.Split(server, ",") {
		u, err := url.Parse(strings.TrimSpace(s))
		if err != nil || u.Host == "" {
			return cmdutil.FlagErrorf("--server %q is not a URL like nats://host:4222", s)
		}
		switch u.Scheme {
		case "nats", "tls", "ws", "wss":
		default:
			return cmdutil.FlagErrorf("--server %q: the scheme must be nats, tls, ws or wss", s)
		}
	}
	return nil
}

// validGateway checks an SSH gateway address, host:port.
func validGateway(gw string) error {
	if host, port, err := net.SplitHostPort(gw); err != nil || host == "" || port == "" {
		return cmdutil.FlagErrorf("--gateway %q is not host:port", gw)
	}
	return nil
}
