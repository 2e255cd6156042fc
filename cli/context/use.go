package context

import (
	"fmt"
	"os"

	"github.com/spf13/cobra"

	"github.com/gpuaas/gpuaas/cli/cmdutil"
	"github.com/gpuaas/gpuaas/internal/clientconfig"
)

// UseOptions are the inputs of `gpuaas context use`.
type UseOptions struct {
	IO     *cmdutil.IOStreams
	Config func() (*clientconfig.Config, error)
	// EnvContext is GPUAAS_CONTEXT, which wins over the file in this shell.
	EnvContext string

	Name string
}

// NewCmdUse builds `gpuaas context use`; runF replaces useRun in tests.
func NewCmdUse(f *cmdutil.Factory, runF func(*UseOptions) error) *cobra.Command {
	opts := &UseOptions{IO: f.IOStreams, Config: f.Config, EnvContext: os.Getenv(clientconfig.EnvContext)}
	return &cobra.Command{
		Use:   "use NAME",
		Short: "Make a context the current one",
		Long: `Make NAME the config file's current context, which later commands run
against. --context and GPUAAS_CONTEXT still pick another per command.`,
		Example: `  gpuaas context use prod`,
		Args:    cmdutil.ExactArgs(1, "a context name"),
		RunE: func(_ *cobra.Command, args []string) error {
			opts.Name = args[0]
			if runF != nil {
				return runF(opts)
			}
			return useRun(opts)
		},
	}
}

func useRun(opts *UseOptions) error {
	cfg, err := opts.Config()
	if err != nil {
		return err
	}
	if _, ok := cfg.Context(opts.Name); !ok {
		return unknownContext(cfg, opts.Name)
	}
	if err := cfg.UseContext(opts.Name); err != nil {
		return err
	}
	if err := cfg.Save(); err != nil {
		return err
	}
	fmt.Fprintf(opts.IO.ErrOut, "Current context is now %s\n", opts.Name)
	if opts.EnvContext != "" && opts.EnvContext != opts.Name {
		fmt.Fprintf(opts.IO.ErrOut, "note: %s=%s still picks %s in this shell\n", clientconfig.EnvContext, opts.EnvContext, opts.EnvContext)
	}
	return nil
}
