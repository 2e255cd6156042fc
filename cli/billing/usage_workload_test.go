package billing

import (
	"context"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/gpuaas/gpuaas/cli/cmdutil"
	"github.com/gpuaas/gpuaas/internal/api"
)

// TestUsageWorkloadFlags: `billing usage --workload [ID]` reaches the run
// with the id; misuses are refused as usage errors before anything is
// asked.
func TestUsageWorkloadFlags(t *testing.T) {
	parse := func(args ...string) (*UsageOptions, error) {
		ios, _, _, _ := cmdutil.Test()
		var got *UsageOptions
		cmd := NewCmdUsage(&cmdutil.Factory{IOStreams: ios}, func(_ context.Context, o *UsageOptions) error { got = o; return nil })
		cmd.SetArgs(args)
		cmd.SetOut(io.Discard)
		cmd.SetErr(io.Discard)
		_, err := cmd.ExecuteC()
		return got, err
	}
	if o, err := parse("--workload"); err != nil || !o.Workload || o.WorkloadID != "" {
		t.Errorf("--workload: %+v, %v", o, err)
	}
	if o, err := parse("--workload", "w-0123456789ab"); err != nil || !o.Workload || o.WorkloadID != "w-0123456789ab" || o.JobID != "" {
		t.Errorf("--workload ID: %+v, %v", o, err)
	}
	for _, bad := range []struct {
		args []string
		want string
	}{
		{[]string{"w-0123456789ab"}, "only --job takes one"},
		{[]string{"--workload", "j-0123456789ab"}, "is not a workload id"},
		{[]string{"--workload", "w-0123456789ab", "w-0123456789ac"}, "at most one workload id"},
		{[]string{"--workload", "--job"}, "cannot be used with"},
		{[]string{"--workload", "--alloc", "a-0123456789ab"}, "cannot be used with"},
	} {
		_, err := parse(bad.args...)
		if cmdutil.ExitCodeOf(err) != cmdutil.ExitUsage || err == nil || !strings.Contains(err.Error(), bad.want) {
			t.Errorf("usage %v: %v; want a usage error naming %q", bad.args, err, bad.want)
		}
	}
}

// TestWriteWorkloadUsage: the table on a terminal (durations, money,
// total) and the piped rows (seconds, GPU-seconds, minor units).
func TestWriteWorkloadUsage(t *testing.T) {
	started := time.Date(2026, 7, 1, 12, 10, 0, 0, time.UTC)
	resp := &api.BillingUsageResponse{Currency: "usd", TotalMinor: 636, Workloads: []api.WorkloadUsage{
		{WorkloadID: "w-0123456789ab", Name: "web", State: api.WorkloadStopped, AllocationID: "a-0123456789ab",
			StartedAt: &started, Seconds: 1200, GPUSeconds: 9600, AmountMinor: 586, Currency: "usd",
			AppPricePerHourMinor: 150, AppAmountMinor: 50},
		{WorkloadID: "w-0123456789ac", Name: "never", State: api.WorkloadPending, AllocationID: "a-0123456789ab", Currency: "usd"},
	}}
	for _, tty := range []bool{true, false} {
		ios, _, out, _ := cmdutil.Test()
		ios.SetStdoutTTY(tty)
		ios.SetNoColor(true)
		opts := &UsageOptions{IO: ios, Now: func() time.Time { return started.Add(time.Hour) }}
		if err := writeWorkloadUsage(t.Context(), opts, resp); err != nil {
			t.Fatal(err)
		}
		want := []string{"w-0123456789ab\tweb\tstopped\ta-0123456789ab\t2026-07-01T12:10:00Z\t1200\t9600\t586\t50\n",
			"w-0123456789ac\tnever\tpending\ta-0123456789ab\t\t0\t0\t0\t0\n"}
		if tty {
			want = []string{"WORKLOAD", "GPU-SECONDS", "20m0s", "9600", "$5.86", "APP", "$0.50", "total $6.36\n"}
		}
		for _, w := range want {
			if !strings.Contains(out.String(), w) {
				t.Errorf("tty %v: output lacks %q:\n%s", tty, w, out.String())
			}
		}
	}
}
