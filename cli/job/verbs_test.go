package job

import (
	"context"
	"testing"
	"time"

	"github.com/gpuaas/gpuaas/cli/cmdutil/cmdtest"
)

func TestNewCmdVerbs(t *testing.T) {
	ios, _, _, _ := cmdtest.Streams(false)
	f := cmdtest.Factory(ios)

	var g *GetOptions
	if err := cmdtest.Execute(NewCmdGet(f, func(_ context.Context, o *GetOptions) error { g = o; return nil }), "j-1", "--json=id,state"); err != nil || g.ID != "j-1" || g.Exporter == nil {
		t.Errorf("get: %v %+v", err, g)
	}
	cmdtest.WantUsageError(t, cmdtest.Execute(NewCmdGet(f, func(context.Context, *GetOptions) error { return nil })), "job ID")

	var l *ListOptions
	if err := cmdtest.Execute(NewCmdList(f, func(_ context.Context, o *ListOptions) error { l = o; return nil }), "--alloc", "a-1", "--limit", "5"); err != nil || l.Allocation != "a-1" || l.Limit != 5 {
		t.Errorf("list: %v %+v", err, l)
	}
	cmdtest.WantUsageError(t, cmdtest.Execute(NewCmdList(f, func(context.Context, *ListOptions) error { return nil }), "--limit", "-1"), "--limit")

	var w *WaitOptions
	if err := cmdtest.Execute(NewCmdWait(f, func(_ context.Context, o *WaitOptions) error { w = o; return nil }), "j-2", "--timeout", "3m"); err != nil || w.ID != "j-2" || w.Timeout != 3*time.Minute {
		t.Errorf("wait: %v %+v", err, w)
	}
	cmdtest.WantUsageError(t, cmdtest.Execute(NewCmdWait(f, func(context.Context, *WaitOptions) error { return nil }), "j-2", "--timeout", "-1s"), "--timeout")

	var c *CancelOptions
	if err := cmdtest.Execute(NewCmdCancel(f, func(_ context.Context, o *CancelOptions) error { c = o; return nil }), "j-3"); err != nil || c.ID != "j-3" {
		t.Errorf("cancel: %v %+v", err, c)
	}
}
