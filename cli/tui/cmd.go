// Package tui is the `gpuaas tui` command; the dashboard itself is the
// top-level package tui.
package tui

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"

	tea "github.com/charmbracelet/bubbletea"
	"github.com/charmbracelet/ssh"
	"github.com/spf13/cobra"

	"github.com/gpuaas/gpuaas/cli/cmdutil"
	sshcmd "github.com/gpuaas/gpuaas/cli/ssh"
	sshconfigcmd "github.com/gpuaas/gpuaas/cli/sshconfig"
	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/clientconfig"
	"github.com/gpuaas/gpuaas/internal/sshconfig"
	"github.com/gpuaas/gpuaas/tui"
	"github.com/gpuaas/gpuaas/tui/common"
)

// NewCmdTUI builds `gpuaas tui`.
func NewCmdTUI(f *cmdutil.Factory) *cobra.Command {
	return &cobra.Command{
		Use:   "tui",
		Short: "Open the terminal dashboard",
		Long: `Open the terminal dashboard: your allocations with live status, the
details of the selected one (provisioning timeline, cost so far, how to
ssh in, its jobs and workloads), a wizard to create one, release with
confirmation, ssh into the selected allocation, run an app from the catalog
on it, and a jobs view with each job's log, followed live. Operators also
get a nodes view (docs/tui.md).

Keys: c create, x release, s ssh, a run an app, enter details, J jobs,
A all/recent, / filter, : command line (:jobs, :nodes, :allocs, :q), ? help,
q quit.

The same dashboard is what ` + "`ssh gpuaas-<context>`" + ` shows, through the SSH
gateway, once ` + "`gpuaas ssh-config`" + ` has written the OpenSSH config.`,
		Args: cmdutil.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			return run(c.Context(), f)
		},
	}
}

func run(ctx context.Context, f *cmdutil.Factory) error {
	ios := f.IOStreams
	if !ios.IsStdinTTY() || !ios.IsStdoutTTY() {
		return cmdutil.FlagErrorf("gpuaas tui needs a terminal; use `gpuaas alloc list` in scripts")
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	m, err := tui.NewFromAccount(ctx, Account(f), common.NewRenderer(ios.Out, common.ProfileFor(os.Getenv)), localSSH(f), localSSHCommand)
	if err != nil {
		return err
	}
	p := tea.NewProgram(m, tea.WithAltScreen(), tea.WithContext(ctx), tea.WithInput(ios.In), tea.WithOutput(ios.Out))
	if _, err := p.Run(); err != nil && !errors.Is(err, tea.ErrProgramKilled) {
		return fmt.Errorf("tui: %w", err)
	}
	return nil
}

// Account is whom the dashboard acts for: the user f acts for, with f's
// client (as f hands it out when the dashboard starts), context and clock.
func Account(f *cmdutil.Factory) tui.Account {
	return tui.Account{
		Client: func() (*api.Client, error) { return f.Client() },
		Active: f.Active,
		Now:    f.Now,
	}
}

// ServeSSH serves the dashboard on a session of the gateway's command mode
// (cmdutil.SSHDashboard), as the user f acts for.
func ServeSSH(s ssh.Session, pty ssh.Pty, f *cmdutil.Factory) error {
	return tui.ServeSSH(s, pty, Account(f))
}

// localSSHCommand is how to reach an allocation from this terminal:
// `gpuaas ssh`, or OpenSSH with the config `gpuaas ssh-config` writes.
func localSSHCommand(active clientconfig.Active) func(string) string {
	alias := sshconfig.Alias(active.Name)
	return func(id string) string { return "gpuaas ssh " + id + "  or  ssh " + id + "@" + alias }
}

// localSSH runs what `gpuaas ssh <alloc>` runs: the system OpenSSH with
// the context's fresh certificate and generated config.
func localSSH(f *cmdutil.Factory) tui.SSHFunc {
	env := sshconfigcmd.EnvOf(f)
	return func(ctx context.Context, allocID string) (*exec.Cmd, error) {
		path, err := exec.LookPath("ssh")
		if err != nil {
			return nil, errors.New("ssh not found: install the OpenSSH client")
		}
		s, err := sshconfigcmd.Prepare(ctx, env, "")
		if err != nil {
			return nil, err
		}
		argv := sshcmd.Argv(path, s.Paths.Config, s.Alias, allocID, nil)
		return exec.Command(argv[0], argv[1:]...), nil
	}
}
