// Package ssh holds `gpuaas ssh`: OpenSSH to an allocation through the
// gateway, with the context's certificate and config.
package ssh

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"regexp"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/gpuaas/gpuaas/cli/cmdutil"
	"github.com/gpuaas/gpuaas/cli/sshconfig"
)

// Options are the inputs of `gpuaas ssh`.
type Options struct {
	sshconfig.Env
	// LookPath finds the ssh program (exec.LookPath).
	LookPath func(file string) (string, error)
	// Exec runs argv in the foreground on the command's streams and
	// returns its exit status. Tests replace it to check argv alone.
	Exec func(ctx context.Context, ios *cmdutil.IOStreams, argv []string) (int, error)

	AllocID string
	Command []string
}

// allocIDRE keeps the destination from ever reading as an ssh option.
var allocIDRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]*$`)

// NewCmdSSH builds `gpuaas ssh`; runF replaces run in tests.
func NewCmdSSH(f *cmdutil.Factory, runF func(context.Context, *Options) error) *cobra.Command {
	opts := &Options{Env: sshconfig.EnvOf(f), LookPath: exec.LookPath, Exec: execForeground}
	cmd := &cobra.Command{
		Use:   "ssh <alloc-id> [--] [command...]",
		Short: "Open a shell or run a command on an allocation over SSH",
		Long: `Run the system OpenSSH client to an allocation through the gateway, with
the current context's key and certificate: an interactive shell, or the
command given after the allocation id.

The certificate is renewed first when it is missing or ends within 5
minutes, and the config ` + "`gpuaas ssh-config`" + ` writes is refreshed; ssh runs
with -F and that config, so ~/.ssh/config is not read. gpuaas exits with
ssh's exit status: the remote command's, or 255 when ssh itself failed.`,
		Example: `  gpuaas ssh a-7k2m9x4q1c
  gpuaas ssh a-7k2m9x4q1c nvidia-smi
  gpuaas ssh a-7k2m9x4q1c -- ls -la /data`,
		Args: func(c *cobra.Command, args []string) error {
			if len(args) == 0 {
				return cmdutil.FlagErrorf("%s requires an allocation ID", c.CommandPath())
			}
			return nil
		},
		RunE: func(c *cobra.Command, args []string) error {
			opts.AllocID, opts.Command = args[0], args[1:]
			if len(opts.Command) > 0 && opts.Command[0] == "--" {
				opts.Command = opts.Command[1:] // flags stop at the id, so a later "--" reaches us
			}
			if !allocIDRE.MatchString(opts.AllocID) {
				return cmdutil.FlagErrorf("invalid allocation ID %q", opts.AllocID)
			}
			if runF != nil {
				return runF(c.Context(), opts)
			}
			return run(c.Context(), opts)
		},
	}
	// Everything after the allocation id belongs to the remote command,
	// as with ssh itself: `gpuaas ssh a-1 ls -la`.
	cmd.Flags().SetInterspersed(false)
	return cmd
}

func run(ctx context.Context, opts *Options) error {
	sshPath, err := opts.LookPath("ssh")
	if err != nil {
		return errors.New("ssh not found: install the OpenSSH client (package openssh-client on Debian and Ubuntu, openssh-clients on Fedora)")
	}
	s, err := sshconfig.Prepare(ctx, opts.Env, "")
	if err != nil {
		return err
	}
	if s.Identity.ExpiresSoon(opts.Now()) {
		fmt.Fprintln(opts.IO.ErrOut, "warning: your session is about to end; run `gpuaas login` to keep SSH access")
	}
	status, err := opts.Exec(ctx, opts.IO, Argv(sshPath, s.Paths.Config, s.Alias, opts.AllocID, opts.Command))
	if err != nil {
		return err
	}
	if status != 0 {
		return cmdutil.ExitStatus("ssh", status)
	}
	return nil
}

// Argv is the ssh command line: only the generated config (-F), the
// allocation id as the user at the context's gateway alias, then "--" and
// the remote command, so none of its words is read as an ssh option.
func Argv(sshPath, configFile, alias, allocID string, command []string) []string {
	argv := []string{sshPath, "-F", configFile, allocID + "@" + alias}
	if len(command) > 0 {
		argv = append(append(argv, "--"), command...)
	}
	return argv
}

// execForeground runs argv with the command's streams (a terminal stays a
// terminal: *os.File streams are handed over as they are) and returns its
// exit status, 128+N when killed by signal N. When ctx ends (SIGINT or
// SIGTERM to gpuaas), ssh gets SIGTERM and is waited for.
func execForeground(ctx context.Context, ios *cmdutil.IOStreams, argv []string) (int, error) {
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = ios.In, ios.Out, ios.ErrOut
	if err := cmd.Start(); err != nil {
		return 0, fmt.Errorf("run ssh: %w", err)
	}
	done := make(chan struct{})
	defer close(done)
	go func() {
		select {
		case <-ctx.Done():
			_ = cmd.Process.Signal(syscall.SIGTERM)
		case <-done:
		}
	}()
	err := cmd.Wait()
	var exitErr *exec.ExitError
	if errors.As(err, &exitErr) {
		if ws, ok := exitErr.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			return 128 + int(ws.Signal()), nil
		}
		return exitErr.ExitCode(), nil
	}
	if err != nil {
		return 0, fmt.Errorf("run ssh: %w", err)
	}
	return 0, nil
}
