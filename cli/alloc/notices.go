package alloc

import (
	"slices"
	"strings"

	"github.com/gpuaas/gpuaas/cli/cmdutil"
	"github.com/gpuaas/gpuaas/internal/api"
)

// shownReason is the reason `alloc get` gives for where the allocation
// stands: the reason of its last change of state, unless one of its GPUs
// failed since (a quarantine notice after that change: its message, "GPU
// … failed (XID 79) and was quarantined; …"), which says more about an
// allocation still active than "provisioned" does.
func shownReason(a *api.Allocation) string {
	for _, n := range slices.Backward(a.Notices) {
		if n.Kind == api.NoticeQuarantine && !n.At.Before(a.UpdatedAt) {
			return api.SanitizeText(strings.TrimPrefix(n.Message, "gpuaas: "))
		}
	}
	return api.SanitizeText(a.Reason)
}

// printNotices writes the allocation's notices under the summary, one a
// line: time, kind, message (and deadline), free text escaped.
func printNotices(ios *cmdutil.IOStreams, a *api.Allocation) error {
	if len(a.Notices) == 0 {
		return nil
	}
	if _, err := ios.Out.Write([]byte("  notices\n")); err != nil {
		return err
	}
	t := cmdutil.NewTablePrinter(ios)
	for _, n := range a.Notices {
		msg := n.Message
		if n.Deadline != nil {
			msg += " (at " + n.Deadline.Local().Format("2006-01-02 15:04:05") + ")"
		}
		t.AddRow("    "+n.At.Local().Format("2006-01-02 15:04:05"), api.SanitizeText(n.Kind), api.SanitizeText(msg))
	}
	return t.Render()
}
