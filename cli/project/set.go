package project

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"

	"github.com/gpuaas/gpuaas/cli/cmdutil"
	"github.com/gpuaas/gpuaas/internal/api"
)

// SetOptions are the inputs of `gpuaas project set`.
type SetOptions struct {
	IO     *cmdutil.IOStreams
	Client func() (*api.Client, error)
	Now    func() time.Time

	Project          string
	IdleReleaseAfter string
}

// NewCmdSet builds `gpuaas project set`; runF replaces setRun in tests.
func NewCmdSet(f *cmdutil.Factory, runF func(context.Context, *SetOptions) error) *cobra.Command {
	opts := &SetOptions{IO: f.IOStreams, Client: f.Client, Now: f.Now}
	cmd := &cobra.Command{
		Use:   "set PROJECT --idle-release-after DURATION|off",
		Short: "Set a project's policy: idle release",
		Long: `Set a project's policy (owners only).

--idle-release-after releases the project's allocations after that long
without activity; off (the default) never does. An allocation may override
it at create (` + "`gpuaas alloc create --idle-release-after`" + `).

Activity is measured at the gateway: any data, in either direction, of an
SSH session, sftp/scp transfer or port forward of the allocation, and GPU
utilisation above the node's threshold. An open session that only sends
keep-alives (ServerAliveInterval) is idle. Before the release a warning is
written into every open session of the allocation and sent as an event
(` + "`gpuaas watch`" + `); any activity cancels it.

A new or changed period starts the idle clock of the running allocations
that follow it at the change: none is released before its warning. The
command lists them, with when each is warned and released if unused.`,
		Example: `  gpuaas project set ml-team --idle-release-after 2h
  gpuaas project set ml-team --idle-release-after off`,
		Args: cmdutil.ExactArgs(1, "a project name"),
		RunE: func(c *cobra.Command, args []string) error {
			opts.Project = args[0]
			if !c.Flags().Changed("idle-release-after") {
				return cmdutil.FlagErrorf("nothing to set: give --idle-release-after DURATION or off")
			}
			if runF != nil {
				return runF(c.Context(), opts)
			}
			return setRun(c.Context(), opts)
		},
	}
	cmd.Flags().StringVar(&opts.IdleReleaseAfter, "idle-release-after", "", "Release allocations after this long without activity (e.g. 2h), or off")
	return cmd
}

func setRun(ctx context.Context, opts *SetOptions) error {
	client, err := opts.Client()
	if err != nil {
		return err
	}
	p, err := client.ProjectSetPolicy(ctx, api.ProjectPolicyRequest{Project: opts.Project, IdleReleaseAfter: opts.IdleReleaseAfter})
	if err != nil {
		return err
	}
	printPolicy(opts.IO.ErrOut, opts.Now(), p)
	return nil
}

// printPolicy says what a project's new idle policy does to its running
// allocations: which follow it, and when each is warned and released if
// nobody uses it.
func printPolicy(w io.Writer, now time.Time, p *api.ProjectPolicy) {
	if p.IdleReleaseAfterSeconds == 0 {
		fmt.Fprintf(w, "Project %s: idle release off\n", p.Project)
		return
	}
	fmt.Fprintf(w, "Project %s: allocations are released after %v without activity\n",
		p.Project, time.Duration(p.IdleReleaseAfterSeconds)*time.Second)
	switch len(p.Affected) {
	case 0:
		fmt.Fprintln(w, "No running allocation follows it now.")
		return
	case 1:
		fmt.Fprintln(w, "1 running allocation follows it; its idle clock started at the change. Unless it is used:")
	default:
		fmt.Fprintf(w, "%d running allocations follow it; their idle clock started at the change. Unless they are used:\n", len(p.Affected))
	}
	for _, a := range p.Affected {
		fmt.Fprintf(w, "  %s  warned %s, released %s (in %v)\n", a.AllocationID, a.WarnAt.UTC().Format("15:04:05 UTC"),
			a.ReleaseAt.UTC().Format("15:04:05 UTC"), a.ReleaseAt.Sub(now).Round(time.Second))
	}
}
