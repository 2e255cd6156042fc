package daemon

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/gpuaas/gpuaas/cli/cmdutil"
	"github.com/gpuaas/gpuaas/cli/cmdutil/cmdtest"
)

// TestHostdGPUFlags: --gpu-sample-interval and --gpu-active-threshold reach
// the agent's Config; bad values are usage errors before anything runs.
func TestHostdGPUFlags(t *testing.T) {
	tests := []struct {
		name         string
		args         []string
		wantInterval time.Duration
		wantPct      float64
		wantErr      string
	}{
		{name: "defaults", wantInterval: 5 * time.Second, wantPct: 5},
		{name: "set", args: []string{"--gpu-sample-interval", "10s", "--gpu-active-threshold", "2.5"}, wantInterval: 10 * time.Second, wantPct: 2.5},
		{name: "zero interval", args: []string{"--gpu-sample-interval", "0s"}, wantErr: "--gpu-sample-interval must be positive"},
		{name: "threshold over 100", args: []string{"--gpu-active-threshold", "101"}, wantErr: "--gpu-active-threshold must be a percentage"},
		{name: "zero threshold", args: []string{"--gpu-active-threshold", "0"}, wantErr: "--gpu-active-threshold must be a percentage"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := parseHostd(tt.args)
			if tt.wantErr != "" {
				if got != nil || cmdutil.ExitCodeOf(err) != cmdutil.ExitUsage || !strings.Contains(err.Error(), tt.wantErr) {
					t.Errorf("got %v; want a usage error %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got.GPUSampleInterval != tt.wantInterval || got.GPUActiveThreshold != tt.wantPct {
				t.Errorf("got %s, %v; want %s, %v", got.GPUSampleInterval, got.GPUActiveThreshold, tt.wantInterval, tt.wantPct)
			}
		})
	}
}

// parseHostd runs `gpuaas hostd ARGS` up to its run function and returns
// the options it would run with (nil when the flags were refused).
func parseHostd(args []string) (*HostdOptions, error) {
	ios, _, _, _ := cmdutil.Test()
	var got *HostdOptions
	cmd := NewCmdHostd(cmdtest.Factory(ios), func(_ context.Context, o *HostdOptions) error { got = o; return nil })
	cmd.SetArgs(args)
	cmd.SetOut(ios.Out)
	cmd.SetErr(ios.ErrOut)
	err := cmd.Execute()
	return got, err
}
