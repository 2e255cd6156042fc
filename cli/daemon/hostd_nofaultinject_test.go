//go:build !faultinject

package daemon

import (
	"context"
	"strings"
	"testing"

	"github.com/gpuaas/gpuaas/cli/cmdutil"
	"github.com/gpuaas/gpuaas/cli/cmdutil/cmdtest"
)

// TestHostdHasNoFaultFlags: a build without the faultinject tag (every
// release build) has no --fail-phase or --delay-phase: hostd refuses them
// and its help does not mention them.
func TestHostdHasNoFaultFlags(t *testing.T) {
	clearDaemonEnv(t)
	for _, flag := range []string{"--fail-phase=user_create", "--delay-phase=readiness=5m"} {
		ios, _, _, _ := cmdutil.Test()
		ran := false
		cmd := NewCmdHostd(cmdtest.Factory(ios), func(context.Context, *HostdOptions) error { ran = true; return nil })
		err := runDaemon(cmd, ios, "--sim", "h100-baremetal", flag)
		if err == nil || ran || !strings.Contains(err.Error(), "unknown flag") {
			t.Errorf("hostd %s: got %v (ran %t); want an unknown flag", flag, err, ran)
		}
	}
	ios, _, stdout, _ := cmdutil.Test()
	cmd := NewCmdHostd(cmdtest.Factory(ios), nil)
	if err := runDaemon(cmd, ios, "--help"); err != nil {
		t.Fatal(err)
	}
	if help := stdout.String(); strings.Contains(help, "fail-phase") || strings.Contains(help, "delay-phase") || !strings.Contains(help, "--sim") {
		t.Errorf("hostd --help of a release build mentions the fault flags (or lacks --sim):\n%s", help)
	}
}
