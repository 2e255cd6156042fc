package daemon

import (
	"strings"
	"testing"

	"github.com/gpuaas/gpuaas/cli/cmdutil"
	"github.com/gpuaas/gpuaas/cli/cmdutil/cmdtest"
)

// TestDevHelpSaysConnectionsAreAuthenticated is the regression test of
// "`gpuaas dev --help` says there is no connection auth while the banner
// says there is": the help says, as the banner does, that every NATS
// connection is authenticated (the auth callout), and says what dev does
// lack (TLS).
func TestDevHelpSaysConnectionsAreAuthenticated(t *testing.T) {
	ios, _, _, _ := cmdutil.Test()
	cmd := NewCmdDev(cmdtest.Factory(ios), nil, nil)
	help := cmd.Long + "\n" + cmd.Flags().FlagUsages()
	if strings.Contains(help, "no connection auth") {
		t.Errorf("gpuaas dev --help says there is no connection auth:\n%s", help)
	}
	for _, want := range []string{"auth callout", "authenticated", "no TLS"} {
		if !strings.Contains(help, want) {
			t.Errorf("gpuaas dev --help does not say %q:\n%s", want, help)
		}
	}
}
