package job

import (
	"context"
	"fmt"

	"github.com/gpuaas/gpuaas/cli/cmdutil"
	"github.com/gpuaas/gpuaas/internal/api"
)

// streamJob prints a job's output as it runs (job.logs, followed), then
// how it ended, and returns the error the command ends with: the job's
// own exit code, or ExitJobPlatformFailure (jobExit).
func streamJob(ctx context.Context, ios *cmdutil.IOStreams, client *api.Client, id string) error {
	lines := 0
	if _, err := followLogs(ctx, client, api.JobLogsRequest{ID: id}, true, func(l api.LogLine) error {
		lines++
		return printLogLine(ctx, ios, nil, l)
	}); err != nil {
		return err
	}
	j, err := client.JobGet(ctx, id)
	if err != nil {
		return err
	}
	fmt.Fprintf(ios.ErrOut, "job %s: %s\n", j.ID, j.State)
	if lines == 0 {
		// A node that keeps no log (an older hostd): the end of the
		// output its report carried.
		printOutput(ios, j)
	}
	return jobExit(j)
}
