// Package ops holds `gpuaas ops`: platform administration that is neither a
// node nor a user's business — the SSH certificate authorities, the NATS
// trust model's keys, the ledger check, dead outbox events and the slice
// guest image.
package ops

import (
	"github.com/spf13/cobra"

	"github.com/gpuaas/gpuaas/cli/cmdutil"
	"github.com/gpuaas/gpuaas/cli/ops/image"
	"github.com/gpuaas/gpuaas/cli/ops/outbox"
)

// NewCmdOps builds `gpuaas ops`.
func NewCmdOps(f *cmdutil.Factory) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "ops <command>",
		Short: "Run the platform: SSH CAs, NATS keys, the ledger check and dead outbox events (admins)",
	}
	ca := &cobra.Command{
		Use:   "ca <command>",
		Short: "List, rotate and retire the SSH certificate authorities' keys",
		Long: `controld runs three SSH certificate authorities: user (certificates from
` + "`gpuaas login`" + `), host (the gateway's host certificate) and internal
(one-minute tickets from the gateway to hostd). Each signs with one active
key and trusts every key that is not retired.

A rotation: ` + "`gpuaas ops ca rotate --ca user`" + ` adds a key that signs from
then on while the old one stays trusted; once the old certificates have
expired (12h for user certificates), ` + "`gpuaas ops ca retire`" + ` drops it.
For the host CA, stage the new key first (--stage) so users' known_hosts
learn it (` + "`gpuaas ssh-config`" + `) before the gateway presents it.`,
	}
	ca.AddCommand(
		NewCmdCAList(f, nil),
		NewCmdCARotate(f, nil),
		NewCmdCARetire(f, nil),
	)
	cmd.AddCommand(ca, NewCmdNATSSetup(f, nil), newCmdNATSIdentity(f), NewCmdLedger(f), NewCmdAudit(f), outbox.NewCmdOutbox(f), image.NewCmdImage(f))
	return cmd
}
