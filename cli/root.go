// Package cli is the gpuaas command tree. Main builds it, runs it, and maps
// whatever error a command returns to an exit code, in one place.
package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"

	"github.com/gpuaas/gpuaas/cli/admin"
	"github.com/gpuaas/gpuaas/cli/alloc"
	"github.com/gpuaas/gpuaas/cli/auth"
	"github.com/gpuaas/gpuaas/cli/billing"
	"github.com/gpuaas/gpuaas/cli/catalog"
	"github.com/gpuaas/gpuaas/cli/cmdutil"
	contextcmd "github.com/gpuaas/gpuaas/cli/context"
	"github.com/gpuaas/gpuaas/cli/node"
	"github.com/gpuaas/gpuaas/cli/ops"
	"github.com/gpuaas/gpuaas/cli/project"
	"github.com/gpuaas/gpuaas/cli/session"
	sshcmd "github.com/gpuaas/gpuaas/cli/ssh"
	"github.com/gpuaas/gpuaas/cli/sshconfig"
	"github.com/gpuaas/gpuaas/cli/tui"
	"github.com/gpuaas/gpuaas/cli/watch"
	"github.com/gpuaas/gpuaas/internal/api"
)

// Command groups in the root help.
const (
	groupCore     = "core"
	groupOperator = "operator"
	groupDaemon   = "daemon"
)

// Main runs gpuaas with args (without the program name) and returns the
// process exit code.
func Main(ctx context.Context, args []string) int {
	f := cmdutil.New(cmdutil.System())
	defer f.Close()
	return run(ctx, f, args, daemonCommands(f)...)
}

func run(ctx context.Context, f *cmdutil.Factory, args []string, extra ...*cobra.Command) int {
	root := NewRootCmd(f, extra...)
	root.SetArgs(args)
	cmd, err := root.ExecuteContextC(ctx)
	if err == nil {
		return cmdutil.ExitOK
	}
	if ctx.Err() != nil {
		// Whatever failed, it failed because we were told to stop.
		err = context.Canceled
	}
	printError(f.IOStreams.ErrOut, cmd, err)
	return cmdutil.ExitCodeOf(err)
}

// printError is the one place errors reach the user: the message, then a
// hint saying what to do about it.
func printError(w io.Writer, cmd *cobra.Command, err error) {
	var flagErr *cmdutil.FlagError
	var apiErr *api.Error
	switch {
	case errors.Is(err, cmdutil.ErrCancelled):
		return // the user said no; the prompt is on screen
	case errors.Is(err, cmdutil.ErrReported):
		return // ssh (or another program we ran) already said why
	case errors.Is(err, context.Canceled):
		fmt.Fprintln(w, "interrupted")
		return
	case errors.As(err, &flagErr):
		fmt.Fprintf(w, "error: %v\nRun '%s --help' for usage.\n", err, cmd.CommandPath())
		return
	}
	fmt.Fprintf(w, "error: %v\n", err)
	if !errors.As(err, &apiErr) {
		return
	}
	hint := apiErr.Hint
	if hint == "" && apiErr.Code == api.CodeUnauthenticated {
		hint = "run `gpuaas login`"
	}
	if hint != "" {
		fmt.Fprintf(w, "hint: %s\n", hint)
	}
}

// NewRootCmd builds the command tree over f. extra commands (the daemons)
// are added under their own help group. Build a fresh tree per run: cobra
// commands keep flag state.
func NewRootCmd(f *cmdutil.Factory, extra ...*cobra.Command) *cobra.Command {
	ios := f.IOStreams
	root := &cobra.Command{
		Use:   "gpuaas",
		Short: "Rent GPUs from the terminal",
		Long: strings.TrimSpace(`
Rent whole GPU nodes or GPU slices, reach them with ssh, and pay from a
prepaid balance.

Settings come from flags, then GPUAAS_CONTEXT, GPUAAS_SERVER, GPUAAS_TOKEN
and GPUAAS_PROJECT, then the config file ($GPUAAS_CONFIG_DIR,
$XDG_CONFIG_HOME/gpuaas or ~/.config/gpuaas). See ` + "`gpuaas help exit-codes`" + `.`),
		Version:       Version,
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.SetIn(ios.In)
	root.SetOut(ios.Out)
	root.SetErr(ios.ErrOut)
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return cmdutil.FlagErrorWrap(err) })

	pf := root.PersistentFlags()
	pf.StringVar(&f.Flags.Context, "context", "", "Config context to use instead of the current one")
	pf.StringVarP(&f.Flags.Project, "project", "p", "", "Project to act in (default: the context's project)")

	root.AddGroup(
		&cobra.Group{ID: groupCore, Title: "Core commands:"},
		&cobra.Group{ID: groupOperator, Title: "Operator commands:"},
	)
	if len(extra) > 0 {
		root.AddGroup(&cobra.Group{ID: groupDaemon, Title: "Daemons:"})
	}
	addToGroup(root, groupCore,
		auth.NewCmdLogin(f, nil),
		auth.NewCmdLogout(f, nil),
		auth.NewCmdWhoami(f, nil),
		project.NewCmdProject(f),
		catalog.NewCmdCatalog(f),
		alloc.NewCmdAlloc(f),
		billing.NewCmdBilling(f),
		sshcmd.NewCmdSSH(f, nil),
		sshconfig.NewCmdSSHConfig(f, nil),
		session.NewCmdSession(f),
		tui.NewCmdTUI(f),
		watch.NewCmdWatch(f, nil),
		contextcmd.NewCmdContext(f),
	)
	addToGroup(root, groupOperator, node.NewCmdNode(f), ops.NewCmdOps(f))
	addToGroup(root, groupOperator, admin.NewCmdAdmin(f))
	addToGroup(root, groupDaemon, extra...)
	root.AddCommand(newExitCodesTopic())

	rejectUnknownSubcommands(root)
	return root
}

func addToGroup(root *cobra.Command, group string, cmds ...*cobra.Command) {
	for _, c := range cmds {
		if c.GroupID == "" {
			c.GroupID = group
		}
		root.AddCommand(c)
	}
}

// rejectUnknownSubcommands makes every command group print its help when
// called alone and fail with a usage error on an unknown subcommand. Cobra
// on its own prints help and exits 0 for `gpuaas alloc frobnicate`.
func rejectUnknownSubcommands(cmd *cobra.Command) {
	for _, c := range cmd.Commands() {
		rejectUnknownSubcommands(c)
	}
	if !cmd.HasSubCommands() || cmd.Runnable() {
		return
	}
	cmd.Args = cobra.ArbitraryArgs
	cmd.RunE = func(c *cobra.Command, args []string) error {
		if len(args) == 0 {
			return c.Help()
		}
		msg := fmt.Sprintf("unknown command %q for %q", args[0], c.CommandPath())
		if c.SuggestionsMinimumDistance <= 0 {
			c.SuggestionsMinimumDistance = 2 // cobra's default, set only on its own path
		}
		if s := c.SuggestionsFor(args[0]); len(s) > 0 {
			msg += "; did you mean " + strings.Join(s, " or ") + "?"
		}
		return cmdutil.FlagErrorf("%s", msg)
	}
}
