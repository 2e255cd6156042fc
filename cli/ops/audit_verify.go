package ops

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/gpuaas/gpuaas/cli/cmdutil"
	"github.com/gpuaas/gpuaas/internal/api"
)

// AuditVerifyOptions are the inputs of `gpuaas ops audit verify`.
type AuditVerifyOptions struct {
	IO       *cmdutil.IOStreams
	Client   func() (*api.Client, error)
	Now      func() time.Time
	Exporter cmdutil.Exporter
}

// ErrAuditBroken is returned (exit status 1) when a row breaks its chain.
var ErrAuditBroken = errors.New("the audit check failed: see the rows above")

// NewCmdAudit builds `gpuaas ops audit`.
func NewCmdAudit(f *cmdutil.Factory) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "audit <command>",
		Short: "Check the audit trail's hash chains (admins)",
	}
	cmd.AddCommand(NewCmdAuditVerify(f, nil))
	return cmd
}

// NewCmdAuditVerify builds `gpuaas ops audit verify`; runF replaces auditVerifyRun in tests.
func NewCmdAuditVerify(f *cmdutil.Factory, runF func(context.Context, *AuditVerifyOptions) error) *cobra.Command {
	opts := &AuditVerifyOptions{IO: f.IOStreams, Client: f.Client, Now: f.Now}
	cmd := &cobra.Command{
		Use:   "verify",
		Short: "Recompute every audit stream's hash chain and name the rows that break it",
		Long: `Recompute the hash of every audit row from its fields, stream by stream (one
per project, one for the platform), and check each row follows the one
before. It prints each broken row (edited, deleted or inserted behind
controld's back) and exits 1 when there is one.` +
			cmdutil.PipedHelp("id", "stream", "seq", "problem"),
		Args: cmdutil.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			if runF != nil {
				return runF(c.Context(), opts)
			}
			return auditVerifyRun(c.Context(), opts)
		},
	}
	cmdutil.AddJSONFlags(cmd, &opts.Exporter, cmdutil.FieldsOf(api.AuditProblem{}))
	return cmd
}

func auditVerifyRun(ctx context.Context, opts *AuditVerifyOptions) error {
	client, err := opts.Client()
	if err != nil {
		return err
	}
	resp, err := client.AuditVerify(ctx)
	if err != nil {
		return err
	}
	if opts.Exporter != nil {
		err = opts.Exporter.Write(ctx, opts.IO, resp.Problems)
	} else if len(resp.Problems) > 0 {
		t := cmdutil.NewTablePrinter(opts.IO)
		t.AddHeader("id", "stream", "seq", "problem")
		for _, p := range resp.Problems {
			t.AddRow(fmt.Sprint(p.ID), p.Stream, fmt.Sprint(p.StreamSeq), p.Problem)
		}
		err = t.Render()
	}
	if err != nil {
		return err
	}
	if resp.OK {
		fmt.Fprintf(opts.IO.ErrOut, "%d audit rows in %d streams, every chain intact\n", resp.Rows, resp.Streams)
		return nil
	}
	fmt.Fprintf(opts.IO.ErrOut, "the audit check FAILED: %d broken rows of %d\n", len(resp.Problems), resp.Rows)
	return ErrAuditBroken
}
