// Package webhook holds `gpuaas webhook` and its verbs.
package webhook

import (
	"github.com/spf13/cobra"

	"github.com/gpuaas/gpuaas/cli/cmdutil"
)

// NewCmdWebhook builds `gpuaas webhook`.
func NewCmdWebhook(f *cmdutil.Factory) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "webhook <command>",
		Short: "Send the project's events to an HTTPS endpoint, signed",
		Long: `Webhooks post the project's events (allocation states, notices, budget
crossings, ...) to an https URL as JSON, signed with HMAC-SHA256 over the
timestamp and body (the Gpuaas-Signature header; docs/webhooks.md shows how to
check it). A delivery is retried with backoff until the receiver answers 2xx;
after its last attempt it is dead, listed by ` + "`gpuaas webhook deliveries --state dead`" + `
and sent again with ` + "`gpuaas webhook retry`" + `. Each delivery has an id (the
Gpuaas-Delivery header), the same on every attempt: drop repeats by it.`,
	}
	cmd.AddCommand(
		NewCmdAdd(f, nil),
		NewCmdList(f, nil),
		NewCmdRemove(f, nil),
		NewCmdTest(f, nil),
		NewCmdDeliveries(f, nil),
		NewCmdRetry(f, nil),
	)
	return cmd
}
