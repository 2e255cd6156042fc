package cli

import (
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/gpuaas/gpuaas/cli/cmdutil"
)

// newExitCodesTopic is `gpuaas help exit-codes`: a hidden command whose help
// is the exit-code table.
func newExitCodesTopic() *cobra.Command {
	cmd := &cobra.Command{
		Use:    "exit-codes",
		Short:  "Exit codes of gpuaas",
		Long:   exitCodesText(),
		Hidden: true,
		Args:   cmdutil.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			_, err := fmt.Fprint(c.OutOrStdout(), c.Long)
			return err
		},
	}
	cmd.SetHelpFunc(func(c *cobra.Command, _ []string) { fmt.Fprint(c.OutOrStdout(), c.Long) })
	return cmd
}

func exitCodesText() string {
	var b strings.Builder
	b.WriteString("gpuaas exits with one of these codes:\n\n")
	for _, e := range cmdutil.ExitCodes {
		fmt.Fprintf(&b, "  %3d  %-21s %s\n", e.Code, e.Name, e.Meaning)
	}
	b.WriteString(waitCodesText)
	return b.String()
}

// waitCodesText says which commands wait and when they exit 20 or 21.
const waitCodesText = `
Waiting: ` + "`gpuaas alloc wait ID --for active|released`" + `, ` + "`alloc create --wait`" + ` and
` + "`alloc release --wait`" + ` exit 0 once the allocation is there, 20 when it can no
longer get there (it failed or release_failed, with the reason printed; or it
was released, or is being released, while waiting for active), and 21 when
--timeout passes first. ` + "`gpuaas watch`" + ` runs until interrupted (130).

Retries: a request no controld answers (none running, or the one that took
it gave no reply within 4s) is sent again, with backoff, within 15s: reads,
and changes with the same Idempotency-Key, which controld never applies
twice. A login is sent again only when no controld received it. The error
(unavailable) says how many attempts were made and names the key.
`
