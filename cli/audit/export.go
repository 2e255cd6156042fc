package audit

import (
	"context"
	"encoding/json"
	"time"

	"github.com/spf13/cobra"

	"github.com/gpuaas/gpuaas/cli/cmdutil"
	"github.com/gpuaas/gpuaas/internal/api"
)

// ExportOptions are the inputs of `gpuaas audit export`.
type ExportOptions struct {
	IO     *cmdutil.IOStreams
	Client func() (*api.Client, error)
	Now    func() time.Time

	Filters
	Format string
	After  int64
}

// NewCmdExport builds `gpuaas audit export`; runF replaces exportRun in tests.
func NewCmdExport(f *cmdutil.Factory, runF func(context.Context, *ExportOptions) error) *cobra.Command {
	opts := &ExportOptions{IO: f.IOStreams, Client: f.Client, Now: f.Now}
	cmd := &cobra.Command{
		Use:   "export --format ndjson [--since 1h] [filters]",
		Short: "Write every matching audit row as NDJSON, oldest first",
		Long: `Write every audit row matching the filters to stdout, oldest first, one JSON
object per line (NDJSON), for a SIEM or an archive. The field names are
stable and documented in docs/audit.md; each row carries its stream, seq and
hashes, so an archive can be checked on its own.`,
		Example: `  gpuaas audit export --format ndjson --since 24h > audit.ndjson
  gpuaas audit export --format ndjson --all --after 1200`,
		Args: cmdutil.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			if opts.Format != "ndjson" {
				return cmdutil.FlagErrorf("invalid --format %q: want ndjson", opts.Format)
			}
			if opts.After < 0 {
				return cmdutil.FlagErrorf("invalid --after %d", opts.After)
			}
			if _, err := opts.request(opts.Now()); err != nil {
				return err
			}
			if runF != nil {
				return runF(c.Context(), opts)
			}
			return exportRun(c.Context(), opts)
		},
	}
	opts.add(cmd)
	cmd.Flags().StringVar(&opts.Format, "format", "ndjson", "Output format: ndjson")
	cmd.Flags().Int64Var(&opts.After, "after", 0, "Only rows after this id")
	return cmd
}

func exportRun(ctx context.Context, opts *ExportOptions) error {
	req, err := opts.request(opts.Now())
	if err != nil {
		return err
	}
	req.After, req.Limit = opts.After, api.AuditPageMax
	client, err := opts.Client()
	if err != nil {
		return err
	}
	enc := json.NewEncoder(opts.IO.Out)
	for {
		resp, err := client.AuditList(ctx, req)
		if err != nil {
			return err
		}
		for _, r := range resp.Records {
			if err := enc.Encode(r); err != nil {
				return err
			}
		}
		if !resp.More || len(resp.Records) == 0 {
			return nil
		}
		req.After = resp.Records[len(resp.Records)-1].ID
	}
}
