package cli

import (
	"fmt"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	"github.com/gpuaas/gpuaas/cli/cmdutil"
)

// NewSSHRootCmd is the command tree `ssh gpuaas@gateway <command>` serves,
// built fresh for each session over the session's factory: the same
// commands as NewRootCmd, minus the daemons; those marked cmdutil.LocalOnly
// (they would act on the gateway's machine) are hidden stubs that say why
// they are not served here, instead of "unknown command". A new command
// is served over SSH unless it is marked.
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
	local := stubLocalOnly(root)
	slices.Sort(local)
	root.Long = "gpuaas commands over SSH, acting as the user of your certificate.\n\n" +
		"Not served here, since they act on the machine they run on: " + strings.Join(local, ", ") +
		". Run those with the gpuaas CLI on your machine."
	// One list of commands, without the local help's groups.
	for _, c := range root.Commands() {
		c.GroupID = ""
	}
	rejectUnknownSubcommands(root)
	return root
}

// stubLocalOnly replaces the commands marked cmdutil.LocalOnly under cmd
// with hidden stubs (localOnlyStub) and returns their paths.
func stubLocalOnly(cmd *cobra.Command) []string {
	var out []string
	for _, c := range cmd.Commands() {
		if reason, local := c.Annotations[cmdutil.AnnotationLocalOnly]; local {
			_, path, _ := strings.Cut(c.CommandPath(), " ")
			out = append(out, path)
			cmd.RemoveCommand(c)
			cmd.AddCommand(localOnlyStub(c, reason))
			continue
		}
		out = append(out, stubLocalOnly(c)...)
	}
	return out
}

// localOnlyStub stands for local-only command c over SSH: whatever its
// arguments, it fails (exit 2) saying why c is not served here and where
// to run it. It keeps the mark, so nothing counts it as served.
func localOnlyStub(c *cobra.Command, reason string) *cobra.Command {
	return &cobra.Command{
		Use:                c.Name(),
		Aliases:            c.Aliases,
		Short:              c.Short + " (not over SSH)",
		Hidden:             true,
		Annotations:        map[string]string{cmdutil.AnnotationLocalOnly: reason},
		DisableFlagParsing: true,
		Args:               cobra.ArbitraryArgs,
		RunE: func(s *cobra.Command, args []string) error {
			path := s.CommandPath()
			if len(args) > 0 && !strings.HasPrefix(args[0], "-") {
				path += " " + args[0]
			}
			return &cmdutil.CodedError{Code: cmdutil.ExitUsage, Err: fmt.Errorf(
				"`%s` is not served over SSH (%s): run it with the gpuaas CLI on your machine", path, reason)}
		},
	}
}
