package secret

import (
	"context"
	"fmt"
	"io"
	"os"

	"github.com/spf13/cobra"

	"github.com/gpuaas/gpuaas/cli/cmdutil"
	"github.com/gpuaas/gpuaas/internal/api"
)

// SetOptions are the inputs of `gpuaas secret set`.
type SetOptions struct {
	IO       *cmdutil.IOStreams
	Client   func() (*api.Client, error)
	Exporter cmdutil.Exporter
	Name     string
	// FromFile is the file holding the value; empty: standard input.
	FromFile string
}

// NewCmdSet builds `gpuaas secret set`; runF replaces setRun in tests.
func NewCmdSet(f *cmdutil.Factory, runF func(context.Context, *SetOptions) error) *cobra.Command {
	opts := &SetOptions{IO: f.IOStreams, Client: f.Client}
	cmd := &cobra.Command{
		Use:   "set NAME [--from-file FILE]",
		Short: "Store a secret's value (from a file or standard input)",
		Long: `Store a value under NAME in the project, replacing any value it had. The
value is read from --from-file, or from standard input: piped, all of it
(e.g. ` + "`printf %s \"$TOKEN\" | gpuaas secret set hf-token`" + `); on a terminal, one
line typed without echo. It is never an argument: command lines are seen
by other users of the machine and kept in shell history.
A value holds at most 64 KiB; a name is 1-63 lowercase letters, digits,
'.', '_' or '-'. Project owners and members may set secrets.`,
		Args: func(c *cobra.Command, args []string) error {
			if len(args) > 1 {
				return cmdutil.FlagErrorf("a secret's value is never an argument (other users see command lines, shells keep them): " +
					"pipe it on standard input or give --from-file")
			}
			return cmdutil.ExactArgs(1, "the secret's name")(c, args)
		},
		RunE: func(c *cobra.Command, args []string) error {
			opts.Name = args[0]
			if err := api.CheckSecretName(opts.Name); err != nil {
				return cmdutil.FlagErrorf("%s", err.Error())
			}
			if runF != nil {
				return runF(c.Context(), opts)
			}
			return setRun(c.Context(), opts)
		},
	}
	cmd.Flags().StringVar(&opts.FromFile, "from-file", "", "Read the value from this file (default: standard input)")
	cmdutil.AddJSONFlags(cmd, &opts.Exporter, cmdutil.FieldsOf(api.Secret{}))
	return cmd
}

// readValue reads the value: the file, all of piped standard input, or a
// line typed without echo on a terminal. Longer than the limit is refused
// here, before anything is sent.
func readValue(ctx context.Context, opts *SetOptions) ([]byte, error) {
	var b []byte
	var err error
	switch {
	case opts.FromFile != "":
		var f *os.File
		if f, err = os.Open(opts.FromFile); err != nil {
			return nil, cmdutil.FlagErrorf("--from-file: %v", err)
		}
		defer f.Close()
		b, err = io.ReadAll(io.LimitReader(f, api.MaxSecretBytes+1))
	case opts.IO.IsStdinTTY():
		var s string
		s, err = opts.IO.ReadPassword(ctx, fmt.Sprintf("Value of %s: ", opts.Name))
		b = []byte(s)
	default:
		b, err = io.ReadAll(io.LimitReader(opts.IO.In, api.MaxSecretBytes+1))
	}
	if err != nil {
		return nil, fmt.Errorf("read the value: %w", err)
	}
	if len(b) > api.MaxSecretBytes {
		return nil, cmdutil.FlagErrorf("the value is longer than %d bytes, the most a secret holds", api.MaxSecretBytes)
	}
	return b, nil
}

func setRun(ctx context.Context, opts *SetOptions) error {
	value, err := readValue(ctx, opts)
	if err != nil {
		return err
	}
	client, err := opts.Client()
	if err != nil {
		return err
	}
	s, err := client.SecretSet(ctx, api.SecretSetRequest{Name: opts.Name, Value: value})
	if err != nil {
		return err
	}
	if opts.Exporter != nil {
		return opts.Exporter.Write(ctx, opts.IO, s)
	}
	_, err = fmt.Fprintf(opts.IO.ErrOut, "Secret %s set (%d bytes, digest %s)\n", s.Name, s.Size, s.Digest)
	return err
}
