package app

import (
	"context"
	"testing"

	"github.com/gpuaas/gpuaas/cli/cmdutil/cmdtest"
)

// TestNewCmdLogs: app logs takes job logs' flags (-f, --since, --after,
// --json of a line's fields) and refuses bad ones by name.
func TestNewCmdLogs(t *testing.T) {
	ios, _, _, _ := cmdtest.Streams(false)
	f := cmdtest.Factory(ios)
	var got *LogsOptions
	run := func(_ context.Context, o *LogsOptions) error { got = o; return nil }
	if err := cmdtest.Execute(NewCmdLogs(f, run), "w-1", "-f", "--since", "10m", "--after", "42", "--json=seq,time,stream,text"); err != nil ||
		got.ID != "w-1" || !got.Follow || got.After != 42 || got.Since != "10m" || got.Exporter == nil {
		t.Fatalf("logs: %v %+v", err, got)
	}
	for _, args := range [][]string{{"w-1", "--since", "yesterday"}, {"w-1", "--after", "-1"}, {"w-1", "--json=lines"}} {
		if err := cmdtest.Execute(NewCmdLogs(f, run), args...); err == nil {
			t.Errorf("app logs %v: no error; want a usage error", args)
		}
	}
	cmdtest.WantUsageError(t, cmdtest.Execute(NewCmdLogs(f, run)), "workload ID")
}
