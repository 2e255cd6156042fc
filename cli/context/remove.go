package context

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/gpuaas/gpuaas/cli/cmdutil"
	"github.com/gpuaas/gpuaas/internal/clientconfig"
)

// RemoveOptions are the inputs of `gpuaas context remove`.
type RemoveOptions struct {
	IO     *cmdutil.IOStreams
	Config func() (*clientconfig.Config, error)

	Name string
}

// NewCmdRemove builds `gpuaas context remove`; runF replaces removeRun in
// tests.
func NewCmdRemove(f *cmdutil.Factory, runF func(*RemoveOptions) error) *cobra.Command {
	opts := &RemoveOptions{IO: f.IOStreams, Config: f.Config}
	return &cobra.Command{
		Use:     "remove NAME",
		Aliases: []string{"rm"},
		Short:   "Remove a context from the config",
		Long: `Remove the context NAME from the config file. Its session is not ended on
the server: run ` + "`gpuaas logout --context NAME`" + ` first for that. Its SSH key
stays in the config directory.`,
		Args: cmdutil.ExactArgs(1, "a context name"),
		RunE: func(_ *cobra.Command, args []string) error {
			opts.Name = args[0]
			if runF != nil {
				return runF(opts)
			}
			return removeRun(opts)
		},
	}
}

func removeRun(opts *RemoveOptions) error {
	cfg, err := opts.Config()
	if err != nil {
		return err
	}
	if err := cfg.RemoveContext(opts.Name); err != nil {
		return unknownContext(cfg, opts.Name)
	}
	if err := cfg.Save(); err != nil {
		return err
	}
	fmt.Fprintf(opts.IO.ErrOut, "Removed context %s\n", opts.Name)
	if cfg.CurrentContext == "" && len(cfg.Contexts) > 0 {
		fmt.Fprintln(opts.IO.ErrOut, "No context is current now: pick one with `gpuaas context use NAME`")
	}
	return nil
}
