package node

import (
	"context"
	"testing"
	"time"

	"github.com/gpuaas/gpuaas/cli/cmdutil/cmdtest"
	"github.com/gpuaas/gpuaas/internal/api"
)

func TestNewCmdLogs(t *testing.T) {
	ios, out, _ := testStreams(false)
	var got *LogsOptions
	if err := cmdtest.Execute(NewCmdLogs(cmdtest.Factory(ios), func(_ context.Context, o *LogsOptions) error { got = o; return nil }),
		"gpu-01", "-f", "--since", "10m", "--json", "msg"); err != nil {
		t.Fatal(err)
	}
	if got.Node != "gpu-01" || !got.Follow || got.Since != 10*time.Minute {
		t.Errorf("got node %q follow %v since %v; want gpu-01 true 10m", got.Node, got.Follow, got.Since)
	}
	if err := got.Exporter.Write(context.Background(), ios, api.LogRecord{Seq: 3, Msg: "hello"}); err != nil {
		t.Fatal(err)
	}
	if want := `{"msg":"hello"}` + "\n"; out.String() != want {
		t.Errorf("got %q; want %q", out.String(), want)
	}
	cmdtest.WantUsageError(t, cmdtest.Execute(NewCmdLogs(cmdtest.Factory(ios), nil)), "")
	cmdtest.WantUsageError(t, cmdtest.Execute(NewCmdLogs(cmdtest.Factory(ios), nil), "gpu-01", "--since", "-5m"), "--since")
	cmdtest.WantUsageError(t, cmdtest.Execute(NewCmdLogs(cmdtest.Factory(ios), nil), "gpu-01", "--limit", "9999999"), "--limit")
}

func TestPrintLogRecord(t *testing.T) {
	r := api.LogRecord{Seq: 1, Time: time.Date(2030, 1, 10, 12, 0, 0, 500e6, time.UTC), Level: "INFO", Msg: "task done",
		Attrs: map[string]string{"task": "t-1", "corr": "c-9", "err": "no such file"}}
	ios, out, _ := testStreams(false)
	if err := printLogRecord(ios, r); err != nil {
		t.Fatal(err)
	}
	if want := `2030-01-10T12:00:00.5Z INFO  task done corr=c-9 err="no such file" task=t-1` + "\n"; out.String() != want {
		t.Errorf("got %q; want %q", out.String(), want)
	}
}
