package app

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/gpuaas/gpuaas/cli/cmdutil/cmdtest"
)

func TestNewCmdRun(t *testing.T) {
	ios, _, _, _ := cmdtest.Streams(false)
	f := cmdtest.Factory(ios)
	var got *RunOptions
	capture := func(_ context.Context, o *RunOptions) error { got = o; return nil }
	err := cmdtest.Execute(NewCmdRun(f, capture), "tiny", "--alloc", "a-1", "--name", "web", "-e", "A=1", "-e", "B=x=y",
		"--timeout", "1m", "--", "/bin/wlapp", "serve", "--port", "8080")
	if err != nil || got.Image != "tiny" || got.Allocation != "a-1" || got.Name != "web" || got.Env["A"] != "1" || got.Env["B"] != "x=y" ||
		strings.Join(got.Command, " ") != "/bin/wlapp serve --port 8080" || got.Timeout != time.Minute || got.Detach {
		t.Errorf("run: %v %+v", err, got)
	}
	got = nil
	if err := cmdtest.Execute(NewCmdRun(f, capture), "tiny", "--alloc", "a-1", "-d"); err != nil || got.Command != nil || !got.Detach {
		t.Errorf("run without a command: %v %+v", err, got)
	}
	for _, tt := range []struct {
		args []string
		says string
	}{
		{[]string{"--alloc", "a-1"}, "IMAGE"},
		{[]string{"tiny", "other", "--alloc", "a-1"}, "IMAGE"},
		{[]string{"tiny"}, "--alloc"},
		{[]string{"tiny", "--alloc", "a-1", "--"}, "nothing after --"},
		{[]string{"--alloc", "a-1", "--", "/bin/x"}, "IMAGE"},
		{[]string{"tiny", "--alloc", "a-1", "-e", "NOVALUE"}, "-e"},
		{[]string{"tiny", "--alloc", "a-1", "--timeout", "-1s"}, "--timeout"},
	} {
		cmdtest.WantUsageError(t, cmdtest.Execute(NewCmdRun(f, capture), tt.args...), tt.says)
	}
}

func TestNewCmdVerbs(t *testing.T) {
	ios, _, _, _ := cmdtest.Streams(false)
	f := cmdtest.Factory(ios)

	var p *PsOptions
	if err := cmdtest.Execute(NewCmdPs(f, func(_ context.Context, o *PsOptions) error { p = o; return nil }), "--alloc", "a-1", "--all", "--json=id,state"); err != nil ||
		p.Allocation != "a-1" || !p.All || p.Exporter == nil {
		t.Errorf("ps: %v %+v", err, p)
	}
	cmdtest.WantUsageError(t, cmdtest.Execute(NewCmdPs(f, func(context.Context, *PsOptions) error { return nil }), "extra"), "unexpected argument")

	var g *GetOptions
	if err := cmdtest.Execute(NewCmdGet(f, func(_ context.Context, o *GetOptions) error { g = o; return nil }), "w-1"); err != nil || g.ID != "w-1" {
		t.Errorf("get: %v %+v", err, g)
	}
	cmdtest.WantUsageError(t, cmdtest.Execute(NewCmdGet(f, func(context.Context, *GetOptions) error { return nil })), "workload ID")

	var l *LogsOptions
	if err := cmdtest.Execute(NewCmdLogs(f, func(_ context.Context, o *LogsOptions) error { l = o; return nil }), "w-2"); err != nil || l.ID != "w-2" {
		t.Errorf("logs: %v %+v", err, l)
	}
	var s *StopOptions
	if err := cmdtest.Execute(NewCmdStop(f, func(_ context.Context, o *StopOptions) error { s = o; return nil }), "w-3"); err != nil || s.ID != "w-3" {
		t.Errorf("stop: %v %+v", err, s)
	}
	s = nil
	if err := cmdtest.Execute(NewCmdRm(f, func(_ context.Context, o *StopOptions) error { s = o; return nil }), "w-4"); err != nil || s.ID != "w-4" {
		t.Errorf("rm: %v %+v", err, s)
	}
	cmdtest.WantUsageError(t, cmdtest.Execute(NewCmdRm(f, func(context.Context, *StopOptions) error { return nil })), "workload ID")
}
