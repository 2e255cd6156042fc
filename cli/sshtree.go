package cli

import (
	"github.com/spf13/cobra"

	"github.com/gpuaas/gpuaas/cli/cmdutil"
)

// NewSSHRootCmd is the command tree `ssh gpuaas@gateway <command>` serves,
// built fresh for each session over the session's factory: the same
// commands as NewRootCmd, minus those marked cmdutil.LocalOnly (they would
// act on the gateway's machine) and the daemons. A new command is served
// over SSH unless it is marked.
func NewSSHRootCmd(f *cmdutil.Factory) *cobra.Command {
	ios := f.IOStreams
	root := &cobra.Command{
		Use:           "gpuaas",
		Short:         "gpuaas commands over SSH",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.SetIn(ios.In)
	root.SetOut(ios.Out)
	root.SetErr(ios.ErrOut)
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return cmdutil.FlagErrorWrap(err) })
	root.CompletionOptions.DisableDefaultCmd = true
	addProjectFlag(root, f)

	addCommands(root, f)
	root.AddCommand(newExitCodesTopic())
	removeLocalOnly(root)
	// One list of commands, without the local help's groups.
	for _, c := range root.Commands() {
		c.GroupID = ""
	}
	rejectUnknownSubcommands(root)
	return root
}

// removeLocalOnly removes the commands marked cmdutil.LocalOnly under cmd.
func removeLocalOnly(cmd *cobra.Command) {
	for _, c := range cmd.Commands() {
		if _, local := c.Annotations[cmdutil.AnnotationLocalOnly]; local {
			cmd.RemoveCommand(c)
			continue
		}
		removeLocalOnly(c)
	}
}
