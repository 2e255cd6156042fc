package expose

import (
	"context"
	"fmt"
	"io"
	"os"
	"strconv"
	"time"

	"github.com/spf13/cobra"

	"github.com/gpuaas/gpuaas/cli/cmdutil"
	"github.com/gpuaas/gpuaas/cli/open"
	"github.com/gpuaas/gpuaas/internal/api"
)

// CreateOptions are the inputs of `gpuaas expose ALLOC PORT`.
type CreateOptions struct {
	IO       *cmdutil.IOStreams
	Client   func() (*api.Client, error)
	Exporter cmdutil.Exporter
	Request  api.ExposeCreateRequest
	// Open mints a one-time link and opens it (gpuaas open).
	Open   bool
	Launch func(string) error
}

// NewCmdCreate builds `gpuaas expose ALLOC PORT`; runF replaces createRun
// in tests.
func NewCmdCreate(f *cmdutil.Factory, runF func(context.Context, *CreateOptions) error) *cobra.Command {
	opts := &CreateOptions{IO: f.IOStreams, Client: f.Client, Launch: open.Launch}
	if f.IOStreams.In != io.Reader(os.Stdin) {
		// Served over SSH (the gateway's command mode): the browser is on
		// the user's machine, not here; the link is printed.
		opts.Launch = nil
	}
	cmd := &cobra.Command{
		Use:   "expose ALLOC|WORKLOAD PORT [--share me|project|public] [--ttl 2h] [--name N] [--open]",
		Short: "Serve a port of an allocation (or of a workload) over HTTPS",
		Long: `Serve PORT of an allocation (something listening on localhost:PORT in it: a
notebook, a model server) at https://<port>-<alloc>.<apps domain>, through the
gateway: HTTP/1.1 and HTTP/2, WebSockets and streamed responses. Nothing is
opened on the node; the gateway reaches the port as ssh -L does. A workload's
id (w-…, gpuaas app ps) names the allocation it runs on: its containers
listen on the allocation's network.

Who may open it (--share): me (you; the default), project (the project's
owners and members) or public (anyone with the URL, no login). me and project
need a login: your token as Authorization: Bearer, or a browser opened with
` + "`gpuaas open URL`" + ` (or --open here). It ends after --ttl (default 2h, at most 30d),
with ` + "`gpuaas expose rm`" + `, or when the allocation is released; logging out ends
your browser's access. Ports 1024–65535.`,
		Example: `  gpuaas expose a-7k2mzq4xv9cd 8888 --open
  gpuaas expose a-7k2mzq4xv9cd 8000 --share project --ttl 8h --name llm
  gpuaas expose a-7k2mzq4xv9cd 8080 --share public --ttl 30m`,
		Args: cmdutil.ExactArgs(2, "an allocation or workload id and a port"),
		RunE: func(c *cobra.Command, args []string) error {
			opts.Request.Allocation = args[0]
			port, err := strconv.Atoi(args[1])
			if err != nil || port < api.MinExposePort || port > api.MaxExposePort {
				return cmdutil.FlagErrorf("port %q is not a port from %d to %d", args[1], api.MinExposePort, api.MaxExposePort)
			}
			opts.Request.Port = port
			if _, err := api.CheckExposeShare(opts.Request.Share); err != nil {
				return cmdutil.FlagErrorf("--share must be me, project or public")
			}
			if _, err := api.ParseExposeTTL(opts.Request.TTL); err != nil {
				return cmdutil.FlagErrorf("--ttl: %v", err)
			}
			if runF != nil {
				return runF(c.Context(), opts)
			}
			return createRun(c.Context(), opts)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&opts.Request.Share, "share", api.ShareMe, "Who may open it: me, project or public")
	fl.StringVar(&opts.Request.TTL, "ttl", "2h", "How long it lives (10s to 30d: 30m, 8h, 7d)")
	fl.StringVar(&opts.Request.Name, "name", "", "A name for it in the project (for expose rm)")
	fl.BoolVar(&opts.Open, "open", false, "Open it in your browser, logged in (gpuaas open)")
	_ = cmd.RegisterFlagCompletionFunc("share", cobra.FixedCompletions([]string{api.ShareMe, api.ShareProject, api.SharePublic}, cobra.ShellCompDirectiveNoFileComp))
	cmdutil.AddJSONFlags(cmd, &opts.Exporter, cmdutil.FieldsOf(api.Exposure{}))
	return cmd
}

func createRun(ctx context.Context, opts *CreateOptions) error {
	client, err := opts.Client()
	if err != nil {
		return err
	}
	e, err := client.ExposeCreate(ctx, opts.Request)
	if err != nil {
		return err
	}
	if opts.Exporter != nil {
		return opts.Exporter.Write(ctx, opts.IO, e)
	}
	fmt.Fprintf(opts.IO.ErrOut, "Port %d of %s exposed to %s until %s (%s)\n", e.Port, e.AllocationID,
		shareWho(e.Share), e.ExpiresAt.Local().Format(time.DateTime), e.ID)
	where := e.URL
	if where == "" {
		where = e.Host + " (the platform does not say its apps domain)"
	}
	if _, err := fmt.Fprintln(opts.IO.Out, where); err != nil {
		return err
	}
	if opts.Open && e.URL != "" {
		return open.Link(ctx, client, opts.IO, e.URL, false, opts.Launch)
	}
	return nil
}

func shareWho(share string) string {
	switch share {
	case api.ShareProject:
		return "the project's members"
	case api.SharePublic:
		return "anyone with the URL"
	}
	return "you"
}
