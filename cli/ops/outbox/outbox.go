// Package outbox holds `gpuaas ops outbox`: the events controld's relay
// could not publish to the EVENTS stream and gave up on (dead), listed,
// retried or dropped by an operator.
package outbox

import (
	"strconv"

	"github.com/spf13/cobra"

	"github.com/gpuaas/gpuaas/cli/cmdutil"
)

// NewCmdOutbox builds `gpuaas ops outbox`.
func NewCmdOutbox(f *cmdutil.Factory) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "outbox <command>",
		Short: "List, retry and drop events the outbox relay gave up on",
		Long: `Every change controld makes is written, in the same transaction, as an
event row in the outbox; the relay publishes the rows to the EVENTS stream,
retrying with backoff. A row that still fails after its attempts (20 by
default) becomes dead: nobody is told of that change until an operator
retries it (after fixing the cause: the stream missing, full or refusing
the message) or drops it.

The gauge gpuaas_outbox_events{state="dead"} on controld's /metrics counts
them; the example alert rules in packaging/prometheus fire on it.
Listing needs the operator role, retry and drop the admin role; both are
audited.`,
	}
	cmd.AddCommand(NewCmdList(f, nil), NewCmdRetry(f, nil), NewCmdDrop(f, nil))
	return cmd
}

// parseID reads an outbox event id argument.
func parseID(arg string) (int64, error) {
	id, err := strconv.ParseInt(arg, 10, 64)
	if err != nil || id <= 0 {
		return 0, cmdutil.FlagErrorf("an outbox event id is a positive number, got %q (see `gpuaas ops outbox list`)", arg)
	}
	return id, nil
}
