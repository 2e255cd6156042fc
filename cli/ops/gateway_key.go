package ops

import (
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/gpuaas/gpuaas/cli/cmdutil"
	"github.com/gpuaas/gpuaas/internal/api"
)

// newCmdGatewayKey builds `gpuaas ops gateway-key`.
func newCmdGatewayKey(f *cmdutil.Factory) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "gateway-key <command>",
		Short: "Register, list and revoke the SSH gateways' keys",
		Long: `A node's terminal server lets in only connections that first prove a
gateway certificate, then a one-minute ticket. controld's internal CA
certifies, for an hour at a time, only gateway keys an admin registered
here: the gateway's service token alone (say, a stolen one) cannot have a
key of its own certified, so it opens no shell on a node.

sshgate makes its gateway key next to its host key on first start
(gateway_ed25519_key, the public half in gateway_ed25519_key.pub) and logs
the command to register it. Register one key per gateway host; revoke a
key to stop certifying it (its current certificate lapses within the
hour).`,
	}
	cmd.AddCommand(
		NewCmdGatewayKeyAdd(f, nil),
		NewCmdGatewayKeyList(f, nil),
		NewCmdGatewayKeyRevoke(f, nil),
	)
	return cmd
}

// printGatewayKeys prints gateway keys as a table.
func printGatewayKeys(ios *cmdutil.IOStreams, now time.Time, keys []api.GatewayKey) error {
	if len(keys) == 0 && ios.IsStdoutTTY() {
		fmt.Fprintln(ios.ErrOut, "No gateway keys")
		return nil
	}
	cs := ios.ColorScheme()
	t := cmdutil.NewTablePrinter(ios)
	t.AddHeader("name", "key", "state", "created", "revoked")
	for _, k := range keys {
		t.AddField(k.Name)
		t.AddField(k.ID)
		revoked := ""
		if k.RevokedAt != nil {
			t.AddField("revoked", cmdutil.WithColor(cs.Gray))
			revoked = cmdutil.FormatTime(ios, now, *k.RevokedAt)
		} else {
			t.AddField("in use", cmdutil.WithColor(cs.Green))
		}
		t.AddField(cmdutil.FormatTime(ios, now, k.CreatedAt))
		t.AddField(revoked)
		t.EndRow()
	}
	return t.Render()
}
