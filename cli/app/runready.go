package app

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/gpuaas/gpuaas/cli/cmdutil"
	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/appspec"
)

// readyFlags are `app run`'s readiness flags (docs/apps.md, "Readiness").
type readyFlags struct {
	http, tcp string
	deadline  time.Duration
}

func (r *readyFlags) add(cmd *cobra.Command) {
	cmd.Flags().StringVar(&r.http, "ready-http", "", "Running once an HTTP GET of `PORT/PATH` on the allocation's loopback answers 2xx or 3xx")
	cmd.Flags().StringVar(&r.tcp, "ready-tcp", "", "Running once a TCP connect to `PORT` on the allocation's loopback succeeds")
	cmd.Flags().DurationVar(&r.deadline, "start-deadline", 0, "With --ready-*: failed when not ready this long after its container started (default 5m, 1s-1h)")
}

// apply sets opts.Readiness from the flags, which win over a manifest's
// probe; a bad flag is a usage error naming it.
func (r *readyFlags) apply(c *cobra.Command, opts *RunOptions) error {
	switch {
	case r.http != "" && r.tcp != "":
		return cmdutil.FlagErrorf("--ready-http and --ready-tcp together: give one")
	case r.http != "":
		port, path, _ := strings.Cut(r.http, "/")
		n, err := readyPort("--ready-http", port)
		if err != nil {
			return err
		}
		opts.Readiness = &api.WorkloadProbe{Port: n, HTTPPath: "/" + path, StartDeadline: appspec.DefaultStartDeadline}
	case r.tcp != "":
		n, err := readyPort("--ready-tcp", r.tcp)
		if err != nil {
			return err
		}
		opts.Readiness = &api.WorkloadProbe{Port: n, StartDeadline: appspec.DefaultStartDeadline}
	}
	if !c.Flags().Changed("start-deadline") {
		return nil
	}
	switch {
	case opts.Readiness == nil:
		return cmdutil.FlagErrorf("--start-deadline without a probe: add --ready-http PORT/PATH or --ready-tcp PORT")
	case r.deadline < api.MinStartDeadline || r.deadline > api.MaxStartDeadline:
		return cmdutil.FlagErrorf("invalid --start-deadline %s: want a duration from 1s to 1h", r.deadline)
	}
	opts.Readiness.StartDeadline = r.deadline
	return nil
}

func readyPort(flag, s string) (int, error) {
	n, err := strconv.Atoi(s)
	if err != nil || n < 1024 || n > 65535 {
		return 0, cmdutil.FlagErrorf("invalid %s %q: want a port from 1024 to 65535%s", flag, s,
			map[bool]string{true: " then /PATH", false: ""}[flag == "--ready-http"])
	}
	return n, nil
}

// manifestProbe is a manifest's readiness probe as app.run takes it.
func manifestProbe(p *appspec.Probe) *api.WorkloadProbe {
	if p == nil {
		return nil
	}
	return &api.WorkloadProbe{Port: p.Port, HTTPPath: p.Path, StartDeadline: p.StartDeadline}
}

// readyNote says, on stderr, what the wait is for when there is a probe.
func readyNote(opts *RunOptions) string {
	p := opts.Readiness
	if p == nil {
		return ""
	}
	what := fmt.Sprintf("a TCP connect to port %d", p.Port)
	if p.HTTPPath != "" {
		what = fmt.Sprintf("GET %s on port %d", p.HTTPPath, p.Port)
	}
	return fmt.Sprintf(" (running once %s answers, within %s)", what, p.StartDeadline)
}
