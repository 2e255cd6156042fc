//go:build faultinject

package daemon

import (
	"context"
	"strings"
	"testing"

	"github.com/gpuaas/gpuaas/cli/cmdutil"
	"github.com/gpuaas/gpuaas/cli/cmdutil/cmdtest"
)

// TestHostdFaultFlags: a test build's hostd takes --fail-phase and
// --delay-phase for the sim, from flags or its settings file, and refuses
// them without --sim or malformed.
func TestHostdFaultFlags(t *testing.T) {
	clearDaemonEnv(t)
	tests := []struct {
		name      string
		args      []string
		file      string
		wantFail  []string
		wantDelay []string
		wantErr   string
	}{
		{name: "flags", args: []string{"--sim", "h100-baremetal", "--fail-phase", "user_create", "--delay-phase", "readiness=5m"},
			wantFail: []string{"user_create"}, wantDelay: []string{"readiness=5m"}},
		{name: "settings file", file: "sim: h200-slice\nfail-phase: [gpu_check, define_start]\n",
			wantFail: []string{"gpu_check", "define_start"}},
		{name: "without sim", args: []string{"--fail-phase", "user_create"}, wantErr: "need --sim"},
		{name: "delay without duration", args: []string{"--sim", "h200-slice", "--delay-phase", "readiness"}, wantErr: "PHASE=DURATION"},
		{name: "bad duration", args: []string{"--sim", "h200-slice", "--delay-phase", "readiness=soon"}, wantErr: "bad duration"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ios, _, _, _ := cmdutil.Test()
			var got *HostdOptions
			cmd := NewCmdHostd(cmdtest.Factory(ios), func(_ context.Context, o *HostdOptions) error { got = o; return nil })
			args := tt.args
			if tt.file != "" {
				args = append(args, "--config", settingsFile(t, tt.file))
			}
			err := runDaemon(cmd, ios, args...)
			if tt.wantErr != "" {
				if err == nil || got != nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("got %v; want a usage error saying %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if strings.Join(got.Faults.FailPhases, ",") != strings.Join(tt.wantFail, ",") ||
				strings.Join(got.Faults.DelayPhases, ",") != strings.Join(tt.wantDelay, ",") {
				t.Errorf("got fail %q, delay %q; want %q, %q", got.Faults.FailPhases, got.Faults.DelayPhases, tt.wantFail, tt.wantDelay)
			}
		})
	}
}
