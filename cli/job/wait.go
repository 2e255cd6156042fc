package job

import (
	"context"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/gpuaas/gpuaas/cli/cmdutil"
	"github.com/gpuaas/gpuaas/internal/api"
)

// pollInterval is how often a wait reads the job again.
const pollInterval = 250 * time.Millisecond

// WaitOptions are the inputs of `gpuaas job wait`.
type WaitOptions struct {
	IO     *cmdutil.IOStreams
	Client func() (*api.Client, error)

	ID      string
	Timeout time.Duration
}

// NewCmdWait builds `gpuaas job wait`; runF replaces waitRun in tests.
func NewCmdWait(f *cmdutil.Factory, runF func(context.Context, *WaitOptions) error) *cobra.Command {
	opts := &WaitOptions{IO: f.IOStreams, Client: f.Client}
	cmd := &cobra.Command{
		Use:   "wait ID",
		Short: "Wait for a job to end and exit with its exit code",
		Long: `Wait for a job to end, then exit with the job's own exit code (0 when it
succeeded). When the platform ended it (lost, or its timeout), exit 125
(job_platform_failure, see ` + "`gpuaas help exit-codes`" + `) and print the reason.
A queued job (run --queue --detach) is waited for too: its place in line
is printed whenever it changes.
The end of the job's output (its last 16 KiB) is printed on standard output.`,
		Args: cmdutil.ExactArgs(1, "a job ID"),
		RunE: func(c *cobra.Command, args []string) error {
			opts.ID = args[0]
			if opts.Timeout < 0 {
				return cmdutil.FlagErrorf("invalid --timeout %s: want a positive duration", opts.Timeout)
			}
			if runF != nil {
				return runF(c.Context(), opts)
			}
			return waitRun(c.Context(), opts)
		},
	}
	cmd.Flags().DurationVar(&opts.Timeout, "timeout", 0, "Give up after this long (exit 21); 0 waits as long as the job runs")
	return cmd
}

func waitRun(ctx context.Context, opts *WaitOptions) error {
	client, err := opts.Client()
	if err != nil {
		return err
	}
	_, err = waitJob(ctx, opts.IO, client, opts.ID, opts.Timeout)
	return err
}

// waitJob follows a job until it ends and returns the error the command
// ends with: nil when it succeeded, its own exit code when it failed or
// was cancelled, ExitJobPlatformFailure when the platform ended it.
func waitJob(ctx context.Context, ios *cmdutil.IOStreams, client *api.Client, id string, timeout time.Duration) (*api.Job, error) {
	if timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, timeout)
		defer cancel()
	}
	t := time.NewTicker(pollInterval)
	defer t.Stop()
	shown := ""
	for {
		j, err := client.JobGet(ctx, id)
		if err != nil {
			if ctx.Err() == context.DeadlineExceeded {
				return nil, &cmdutil.CodedError{Code: cmdutil.ExitWaitTimeout, Err: fmt.Errorf("job %s: still %s after %s", id, shown, timeout)}
			}
			return nil, err
		}
		if st := jobState(j, ""); st != shown {
			fmt.Fprintf(ios.ErrOut, "job %s: %s\n", j.ID, st)
			shown = st
		}
		if api.JobFinal(j.State) {
			printOutput(ios, j)
			return j, jobExit(j)
		}
		select {
		case <-ctx.Done():
			if ctx.Err() == context.DeadlineExceeded {
				return j, &cmdutil.CodedError{Code: cmdutil.ExitWaitTimeout, Err: fmt.Errorf("job %s: still %s after %s", id, j.State, timeout)}
			}
			return j, ctx.Err()
		case <-t.C:
		}
	}
}

// jobExit is the error a command following a job ends with once it ended.
func jobExit(j *api.Job) error {
	switch {
	case j.State == api.JobSucceeded:
		return nil
	case j.State == api.JobCancelled && j.ExitCode == nil:
		return &cmdutil.CodedError{Code: cmdutil.ExitError, Err: fmt.Errorf("job %s cancelled: %s", j.ID, j.Reason)}
	case j.State == api.JobLost, j.ExitCode == nil:
		return &cmdutil.CodedError{Code: cmdutil.ExitJobPlatformFailure,
			Err: fmt.Errorf("job %s %s: %s", j.ID, j.State, j.Reason)}
	case j.State == api.JobFailed && strings.HasPrefix(j.Reason, api.JobReasonTimeout+":"):
		return &cmdutil.CodedError{Code: cmdutil.ExitJobPlatformFailure, Err: fmt.Errorf("job %s failed: %s", j.ID, j.Reason)}
	}
	code := *j.ExitCode
	if code == 0 {
		code = cmdutil.ExitError // cancelled, and its process exited 0 on SIGTERM
	}
	return &cmdutil.CodedError{Code: code, Err: fmt.Errorf("job %s %s: %s", j.ID, j.State, j.Reason)}
}

// printOutput prints the end of an ended job's output on stdout, saying
// on stderr when its start is not kept (until logs are: docs/jobs.md).
func printOutput(ios *cmdutil.IOStreams, j *api.Job) {
	if cut := j.OutputBytes - int64(len(j.Output)); cut > 0 {
		fmt.Fprintf(ios.ErrOut, "job %s: the first %d bytes of its output are not kept; its last %d follow\n", j.ID, cut, len(j.Output))
	}
	_, _ = io.WriteString(ios.Out, j.Output)
}
