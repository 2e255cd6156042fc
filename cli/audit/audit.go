// Package audit holds `gpuaas audit` and its verbs: reading the audit
// trail (docs/audit.md).
package audit

import (
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/gpuaas/gpuaas/cli/cmdutil"
	"github.com/gpuaas/gpuaas/internal/api"
)

// NewCmdAudit builds `gpuaas audit`.
func NewCmdAudit(f *cmdutil.Factory) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "audit <command>",
		Short: "Read the audit trail: who changed what, when (project owners, admins)",
		Long: `Every change made through the API writes one audit row in the transaction of
the change: when, who (a user, or a token), what, on what, in which project.
Project owners read their project's rows (-p/--project, else the default
project); admins read every project's and the platform's (--all, or no
project at all). Rows are hash-chained per project (` + "`gpuaas ops audit verify`" + `).
Field names of --json and of ` + "`audit export`" + ` are stable (docs/audit.md).`,
	}
	cmd.AddCommand(NewCmdList(f, nil), NewCmdExport(f, nil), NewCmdStream(f, nil))
	return cmd
}

// Filters are the flags list, export and stream share.
type Filters struct {
	Since  string
	Actor  string
	Action string
	Target string
	All    bool
}

func (fl *Filters) add(cmd *cobra.Command) {
	cmd.Flags().StringVar(&fl.Since, "since", "", "Only rows from this long ago (1h, 30m, 7d) or this time (RFC 3339)")
	cmd.Flags().StringVar(&fl.Actor, "actor", "", "Only rows of this actor: a user's email or id, or a token's id (tk-…)")
	cmd.Flags().StringVar(&fl.Action, "action", "", "Only rows of this action (alloc.create), or a prefix ending in * (alloc.*)")
	cmd.Flags().StringVar(&fl.Target, "target", "", "Only rows about this target: its id (a-…), or type:id")
	cmd.Flags().BoolVar(&fl.All, "all", false, "Every project's rows and the platform's (admins)")
}

// request checks the flags and builds the request's filters at now.
func (fl *Filters) request(now time.Time) (api.AuditListRequest, error) {
	req := api.AuditListRequest{Actor: fl.Actor, Action: fl.Action, Target: fl.Target, AllProjects: fl.All}
	if fl.Since != "" {
		t, err := parseSince(fl.Since, now)
		if err != nil {
			return req, err
		}
		req.Since = &t
	}
	return req, nil
}

// parseSince reads --since: a duration back from now (days allowed:
// "7d") or an RFC 3339 time.
func parseSince(s string, now time.Time) (time.Time, error) {
	if t, err := time.Parse(time.RFC3339, s); err == nil {
		return t, nil
	}
	var d time.Duration
	if days, ok := strings.CutSuffix(s, "d"); ok {
		var err error
		if d, err = time.ParseDuration(days + "h"); err != nil {
			return time.Time{}, cmdutil.FlagErrorf("invalid --since %q: want a duration (1h, 7d) or an RFC 3339 time", s)
		}
		d *= 24
	} else {
		var err error
		if d, err = time.ParseDuration(s); err != nil {
			return time.Time{}, cmdutil.FlagErrorf("invalid --since %q: want a duration (1h, 7d) or an RFC 3339 time", s)
		}
	}
	if d <= 0 {
		return time.Time{}, cmdutil.FlagErrorf("invalid --since %q: want a positive duration", s)
	}
	return now.Add(-d), nil
}
