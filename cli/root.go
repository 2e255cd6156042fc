// Package cli is the gpuaas command tree. Main builds it, runs it, and maps
// whatever error a command returns to an exit code, in one place.
package cli

import (
	"context"
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/gpuaas/gpuaas/cli/admin"
	"github.com/gpuaas/gpuaas/cli/alloc"
	"github.com/gpuaas/gpuaas/cli/app"
	"github.com/gpuaas/gpuaas/cli/audit"
	"github.com/gpuaas/gpuaas/cli/auth"
	"github.com/gpuaas/gpuaas/cli/billing"
	"github.com/gpuaas/gpuaas/cli/catalog"
	"github.com/gpuaas/gpuaas/cli/cmdutil"
	contextcmd "github.com/gpuaas/gpuaas/cli/context"
	"github.com/gpuaas/gpuaas/cli/expose"
	"github.com/gpuaas/gpuaas/cli/image"
	"github.com/gpuaas/gpuaas/cli/job"
	"github.com/gpuaas/gpuaas/cli/node"
	"github.com/gpuaas/gpuaas/cli/open"
	"github.com/gpuaas/gpuaas/cli/ops"
	"github.com/gpuaas/gpuaas/cli/project"
	"github.com/gpuaas/gpuaas/cli/secret"
	"github.com/gpuaas/gpuaas/cli/session"
	sshcmd "github.com/gpuaas/gpuaas/cli/ssh"
	"github.com/gpuaas/gpuaas/cli/sshconfig"
	"github.com/gpuaas/gpuaas/cli/token"
	"github.com/gpuaas/gpuaas/cli/tui"
	"github.com/gpuaas/gpuaas/cli/volume"
	"github.com/gpuaas/gpuaas/cli/watch"
	"github.com/gpuaas/gpuaas/cli/webhook"
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
	f := NewFactory(cmdutil.System())
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
	cmdutil.PrintError(f.IOStreams.ErrOut, cmd.CommandPath(), err)
	cmdutil.PrintCorrelationID(f.IOStreams.ErrOut, f.CorrelationID, err)
	return cmdutil.ExitCodeOf(err)
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
$XDG_CONFIG_HOME/gpuaas or ~/.config/gpuaas). A command that names no
project (-p/--project) acts in your default project, which the server keeps
(` + "`gpuaas project use`" + `). See ` + "`gpuaas help exit-codes`" + `.

Each run tags its requests with one correlation id, which the server logs
on every line about them: GPUAAS_CORRELATION_ID, or a fresh one
(GPUAAS_DEBUG=1 shows it).`),
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
	addProjectFlag(root, f)

	root.AddGroup(
		&cobra.Group{ID: groupCore, Title: "Core commands:"},
		&cobra.Group{ID: groupOperator, Title: "Operator commands:"},
	)
	if len(extra) > 0 {
		root.AddGroup(&cobra.Group{ID: groupDaemon, Title: "Daemons:"})
	}
	addCommands(root, f)
	addToGroup(root, groupDaemon, extra...)
	root.AddCommand(newExitCodesTopic())

	rejectUnknownSubcommands(root)
	_ = addCompletions(root, f) // TestCompletionTableMatchesTree checks the table
	return root
}

// addCommands adds the command tree's nouns to root: the one list both
// the local tree (NewRootCmd) and the tree served over SSH (NewSSHRootCmd)
// are built from. Commands that make no sense over SSH are marked
// cmdutil.LocalOnly here, with the reason.
func addCommands(root *cobra.Command, f *cmdutil.Factory) {
	addToGroup(root, groupCore,
		cmdutil.LocalOnly(auth.NewCmdLogin(f, nil), "keeps the session in this machine's config"),
		cmdutil.LocalOnly(auth.NewCmdLogout(f, nil), "ends the session kept in this machine's config"),
		auth.NewCmdWhoami(f, nil),
		project.NewCmdProject(f),
		catalog.NewCmdCatalog(f),
		image.NewCmdImage(f),
		app.NewCmdApp(f),
		alloc.NewCmdAlloc(f),
		job.NewCmdRun(f, nil),
		job.NewCmdJob(f),
		billing.NewCmdBilling(f),
		volume.NewCmdVolume(f),
		webhook.NewCmdWebhook(f),
		expose.NewCmdExpose(f),
		secret.NewCmdSecret(f),
		cmdutil.LocalOnly(open.NewCmdOpen(f, nil), "opens a browser on this machine"),
		cmdutil.LocalOnly(sshcmd.NewCmdSSH(f, nil), "runs OpenSSH on this machine"),
		cmdutil.LocalOnly(sshconfig.NewCmdSSHConfig(f, nil), "writes OpenSSH's files on this machine"),
		session.NewCmdSession(f),
		token.NewCmdToken(f),
		audit.NewCmdAudit(f),
		cmdutil.LocalOnly(tui.NewCmdTUI(f), "draws on this machine's terminal; over SSH the gateway serves the dashboard itself (ssh -t)"),
		cmdutil.LocalOnly(watch.NewCmdWatch(f, nil), "receives events on a NATS connection of the user's own, which a gateway session lacks"),
		cmdutil.LocalOnly(contextcmd.NewCmdContext(f), "edits this machine's config"),
	)
	addToGroup(root, groupOperator,
		cmdutil.LocalOnly(node.NewCmdNode(f), "operator commands, which a session delegated through the gateway may not call"),
		cmdutil.LocalOnly(ops.NewCmdOps(f), "writes keys and configuration files on this machine"),
		cmdutil.LocalOnly(admin.NewCmdAdmin(f), "reaches the database from this machine (bootstrap); operator commands"),
	)
}

// addProjectFlag adds -p/--project, the one flag every project-scoped
// command takes, to root: the same locally and over SSH (NewSSHRootCmd).
// It becomes the request's Gpuaas-Project header; without it, controld
// uses GPUAAS_PROJECT or the context's project if set, else the user's
// default project (`gpuaas project use`).
func addProjectFlag(root *cobra.Command, f *cmdutil.Factory) {
	root.PersistentFlags().StringVarP(&f.Flags.Project, "project", "p", "",
		"Project to act in (default: your default project, see 'gpuaas project use')")
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
