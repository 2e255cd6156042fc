package audit

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/gpuaas/gpuaas/cli/cmdutil"
	"github.com/gpuaas/gpuaas/internal/api"
)

// StreamOptions are the inputs of `gpuaas audit stream`.
type StreamOptions struct {
	IO     *cmdutil.IOStreams
	Client func() (*api.Client, error)
	Now    func() time.Time

	Filters
	After    int64
	Interval time.Duration
}

// NewCmdStream builds `gpuaas audit stream`; runF replaces streamRun in tests.
func NewCmdStream(f *cmdutil.Factory, runF func(context.Context, *StreamOptions) error) *cobra.Command {
	opts := &StreamOptions{IO: f.IOStreams, Client: f.Client, Now: f.Now}
	cmd := &cobra.Command{
		Use:   "stream [--after ID] [filters]",
		Short: "Follow new audit rows as NDJSON until interrupted",
		Long: `Print audit rows as they are written, one JSON object per line (the fields of
` + "`audit export`" + `), until interrupted. It starts after the newest row (or after
--after ID, or at --since), and asks again every --interval. When controld is
unreachable it keeps its place and resumes after the last row it printed, so
nothing is skipped or repeated; a restarted stream resumes with --after and the
last id it printed.`,
		Args: cmdutil.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			if opts.After < 0 {
				return cmdutil.FlagErrorf("invalid --after %d", opts.After)
			}
			if opts.Interval < 100*time.Millisecond {
				return cmdutil.FlagErrorf("invalid --interval %s: at least 100ms", opts.Interval)
			}
			if _, err := opts.request(opts.Now()); err != nil {
				return err
			}
			if runF != nil {
				return runF(c.Context(), opts)
			}
			return streamRun(c.Context(), opts)
		},
	}
	opts.add(cmd)
	cmd.Flags().Int64Var(&opts.After, "after", 0, "Start after this row id")
	cmd.Flags().DurationVar(&opts.Interval, "interval", time.Second, "How often to ask for new rows")
	return cmd
}

func streamRun(ctx context.Context, opts *StreamOptions) error {
	req, err := opts.request(opts.Now())
	if err != nil {
		return err
	}
	client, err := opts.Client()
	if err != nil {
		return err
	}
	req.After, req.Limit = opts.After, api.AuditPageMax
	if req.After == 0 && req.Since == nil {
		// From now on: after the newest row that matches.
		last := req
		last.Newest, last.Limit = true, 1
		resp, err := client.AuditList(ctx, last)
		if err != nil {
			return err
		}
		if n := len(resp.Records); n > 0 {
			req.After = resp.Records[n-1].ID
		}
	}
	fmt.Fprintf(opts.IO.ErrOut, "following audit rows after %d\n", req.After)
	enc := json.NewEncoder(opts.IO.Out)
	tick := time.NewTicker(opts.Interval)
	defer tick.Stop()
	for {
		resp, err := client.AuditList(ctx, req)
		switch {
		case ctx.Err() != nil:
			return nil
		case err != nil && !retryable(err):
			return err
		case err != nil:
			fmt.Fprintf(opts.IO.ErrOut, "audit stream: %v; resuming after %d\n", err, req.After)
		default:
			for _, r := range resp.Records {
				if err := enc.Encode(r); err != nil {
					return err
				}
				req.After = r.ID
			}
			if resp.More {
				continue
			}
		}
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
	}
}

// retryable reports whether the stream should keep its place and ask
// again: controld unreachable or busy, not a refusal.
func retryable(err error) bool {
	var e *api.Error
	if !errors.As(err, &e) {
		return true // transport: no responders, a timeout, a reconnect
	}
	return e.Code == api.CodeUnavailable || e.Code == api.CodeRateLimited || e.Code == api.CodeInternal
}
