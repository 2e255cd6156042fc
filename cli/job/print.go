package job

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/gpuaas/gpuaas/cli/cmdutil"
	"github.com/gpuaas/gpuaas/internal/api"
)

// listPiped are the list's columns as --help documents them piped.
var listPiped = []string{"id", "state (queued:N is Nth in line)", "exit code", "allocation", "name", "created (RFC 3339)", "reason"}

func exitText(j api.Job) string {
	if j.ExitCode == nil {
		return "-"
	}
	return strconv.Itoa(*j.ExitCode)
}

// listState is the list's state cell: a queued job's place in line
// after its state ("queued:2" is 2nd in line), one word so piped rows keep
// their columns.
func listState(j api.Job) string {
	if j.State == api.JobQueued && j.QueuePosition > 0 {
		return fmt.Sprintf("%s:%d", j.State, j.QueuePosition)
	}
	return j.State
}

func printJobs(ios *cmdutil.IOStreams, list []api.Job) error {
	tp := cmdutil.NewTablePrinter(ios)
	tp.AddHeader("ID", "STATE", "EXIT", "ALLOCATION", "NAME", "CREATED", "REASON")
	for _, j := range list {
		tp.AddRow(j.ID, listState(j), exitText(j), j.AllocationID, j.Name, j.CreatedAt.UTC().Format(time.RFC3339), j.Reason)
	}
	return tp.Render()
}

func printJob(ios *cmdutil.IOStreams, j *api.Job) error {
	w := ios.Out
	fmt.Fprintf(w, "job %s: %s\n", j.ID, j.State)
	if j.State == api.JobQueued {
		fmt.Fprintf(w, "  allocation  %s (%s)\n", j.AllocationID, strings.TrimPrefix(jobState(j, ""), "queued, "))
	} else {
		fmt.Fprintf(w, "  allocation  %s (node %s)\n", j.AllocationID, j.NodeID)
	}
	if j.Name != "" {
		fmt.Fprintf(w, "  name        %s\n", j.Name)
	}
	if j.Phase != "" {
		fmt.Fprintf(w, "  phase       %s\n", j.Phase)
	}
	if j.Retries > 0 || j.Attempt > 1 {
		fmt.Fprintf(w, "  attempt     %d of at most %d (retries: %d, after a platform failure only)\n", j.Attempt, j.Retries+1, j.Retries)
	}
	fmt.Fprintf(w, "  exit code   %s\n", exitText(*j))
	if j.Signal != "" {
		fmt.Fprintf(w, "  signal      %s\n", j.Signal)
	}
	if j.Reason != "" {
		fmt.Fprintf(w, "  reason      %s\n", cmdutil.SafeLines(j.Reason))
	}
	if j.Workdir != "" {
		fmt.Fprintf(w, "  workdir     %s\n", cmdutil.SafeLines(j.Workdir))
	}
	fmt.Fprintf(w, "  release     %s\n", j.Release)
	fmt.Fprintf(w, "  created     %s\n", j.CreatedAt.UTC().Format(time.RFC3339))
	if j.StartedAt != nil {
		fmt.Fprintf(w, "  started     %s\n", j.StartedAt.UTC().Format(time.RFC3339))
	}
	if j.EndedAt != nil {
		fmt.Fprintf(w, "  ended       %s\n", j.EndedAt.UTC().Format(time.RFC3339))
	}
	if j.OutputBytes > 0 {
		fmt.Fprintf(w, "output (last %d of %d bytes):\n%s", len(j.Output), j.OutputBytes, cmdutil.SafeLines(j.Output))
		if !strings.HasSuffix(j.Output, "\n") {
			fmt.Fprintln(w)
		}
	}
	return nil
}
