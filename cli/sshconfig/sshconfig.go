// Package sshconfig holds `gpuaas ssh-config`, and Prepare, which brings a
// context's OpenSSH files up to date (`gpuaas ssh`, login and the dashboard
// use it too). The files themselves are rendered by internal/sshconfig.
package sshconfig

import (
	"context"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/gpuaas/gpuaas/cli/cmdutil"
	"github.com/gpuaas/gpuaas/internal/fuzzytime"
	"github.com/gpuaas/gpuaas/internal/sshconfig"
	"github.com/gpuaas/gpuaas/internal/sshkeys"
)

// Options are the inputs of `gpuaas ssh-config`.
type Options struct {
	Env
	// UserConfig is ~/.ssh/config, which --write edits.
	UserConfig func() (string, error)

	Gateway      string
	Write        bool
	PrintInclude bool
}

// NewCmdSSHConfig builds `gpuaas ssh-config`; runF replaces run in tests.
func NewCmdSSHConfig(f *cmdutil.Factory, runF func(context.Context, *Options) error) *cobra.Command {
	opts := &Options{Env: EnvOf(f), UserConfig: sshconfig.UserConfigPath}
	cmd := &cobra.Command{
		Use:   "ssh-config",
		Short: "Write an OpenSSH config so plain ssh, scp and sftp reach allocations",
		Long: `Write an OpenSSH client config for the current context and print the one
line that includes it from ~/.ssh/config. With it, plain OpenSSH reaches an
allocation through the gateway with no prompts:

  ssh <alloc-id>@<gateway host>      (or <alloc-id>@gpuaas-<context>)
  scp file <alloc-id>@<gateway host>:
  sftp <alloc-id>@<gateway host>
  ssh -L 8888:localhost:8888 <alloc-id>@<gateway host>

Files, in <config dir>/ssh/<context>/: the ed25519 key (made once, never
replaced), its short-lived certificate (renewed here and by ` + "`gpuaas ssh`" + `
when it is missing or ends within 5 minutes), known_hosts trusting the
gateway's host CA keys, and config. The Include line must come before any
Host or Match line in ~/.ssh/config; --write puts it there (in the home
directory the password database gives you, which is the one ssh reads, or
in the file GPUAAS_SSH_USER_CONFIG names when you run ssh -F FILE).

The gateway address is the one controld publishes unless --gateway gives
another, which is stored in the context (--gateway auto forgets it).`,
		Example: `  gpuaas ssh-config
  gpuaas ssh-config --write
  gpuaas ssh-config --gateway gw.example.com:2222
  gpuaas ssh-config --print-include`,
		Args: cmdutil.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			if opts.Gateway != "" && opts.Gateway != GatewayAuto {
				if _, err := sshconfig.ParseGateway(opts.Gateway); err != nil {
					return cmdutil.FlagErrorf("--gateway: %v", err)
				}
			}
			if runF != nil {
				return runF(c.Context(), opts)
			}
			return run(c.Context(), opts)
		},
	}
	cmd.Flags().StringVar(&opts.Gateway, "gateway", "", "Gateway `host:port` to use instead of controld's (stored; \"auto\" forgets it)")
	cmd.Flags().BoolVar(&opts.Write, "write", false, "Also add the Include line to the top of ~/.ssh/config")
	cmd.Flags().BoolVar(&opts.PrintInclude, "print-include", false, "Print the Include line to standard output")
	return cmd
}

func run(ctx context.Context, opts *Options) error {
	s, err := Prepare(ctx, opts.Env, opts.Gateway)
	if err != nil {
		return err
	}
	include, err := sshconfig.IncludeLine(s.Paths.Config)
	if err != nil {
		return err
	}
	w := opts.IO.ErrOut
	fmt.Fprintf(w, "Wrote %s for gateway %s\n", s.Paths.Config, s.Gateway)
	describeCert(opts, s.Identity)
	if opts.PrintInclude {
		fmt.Fprintln(opts.IO.Out, include)
	}
	if opts.Write {
		path, err := opts.UserConfig()
		if err != nil {
			return err
		}
		added, err := sshconfig.AddInclude(path, include, s.Paths.Config)
		if err != nil {
			return err
		}
		if added {
			fmt.Fprintf(w, "Added %q to the top of %s\n", include, path)
		} else {
			fmt.Fprintf(w, "%s already includes it\n", path)
		}
	} else if !opts.PrintInclude {
		where := "~/.ssh/config"
		if path, err := opts.UserConfig(); err == nil {
			where = path
		}
		fmt.Fprintf(w, "Add this line to the top of %s (before any Host or Match line), or run with --write:\n\n    %s\n\n", where, include)
	}
	fmt.Fprintf(w, "Then: ssh <alloc-id>@%s   (or ssh <alloc-id>@%s)\n", s.Gateway.Host, s.Alias)
	fmt.Fprintf(w, "      ssh %s   (the dashboard)   ssh %s alloc list   (any gpuaas command)\n", s.Alias, s.Alias)
	return nil
}

// describeCert says how long the certificate lasts, and warns when the
// session ends too soon for it to be renewed.
func describeCert(opts *Options, id *sshkeys.Identity) {
	w := opts.IO.ErrOut
	now := opts.Now()
	end := sshkeys.ValidBefore(id.Cert)
	verb := "Certificate"
	if id.Renewed {
		verb = "New certificate"
	}
	if end.IsZero() {
		fmt.Fprintf(w, "%s never expires\n", verb)
		return
	}
	fmt.Fprintf(w, "%s valid until %s (%s)\n", verb, end.Local().Format(time.DateTime), fuzzytime.Ago(now, end))
	if id.ExpiresSoon(now) {
		fmt.Fprintln(w, "warning: your session is about to end; run `gpuaas login` to keep SSH access")
	}
}
