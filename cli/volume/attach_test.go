package volume

import (
	"context"
	"testing"
	"time"

	"github.com/gpuaas/gpuaas/cli/cmdutil/cmdtest"
)

func TestNewCmdAttach(t *testing.T) {
	ios, _, _, _ := cmdtest.Streams(false)
	var got *AttachOptions
	cmd := NewCmdAttach(cmdtest.Factory(ios), func(_ context.Context, o *AttachOptions) error { got = o; return nil })
	if err := cmdtest.Execute(cmd, "data", "--alloc", "a-1", "--path", "/models/x", "--no-wait", "--timeout", "1m"); err != nil {
		t.Fatal(err)
	}
	if got.Volume != "data" || got.Alloc != "a-1" || got.Path != "/models/x" || !got.NoWait || got.Timeout != time.Minute {
		t.Errorf("got %+v", *got)
	}
	noop := func(context.Context, *AttachOptions) error { return nil }
	cmdtest.WantUsageError(t, cmdtest.Execute(NewCmdAttach(cmdtest.Factory(ios), noop), "data"), "--alloc")
	cmdtest.WantUsageError(t, cmdtest.Execute(NewCmdAttach(cmdtest.Factory(ios), noop), "--alloc", "a-1"), "volume name")
}

func TestNewCmdDetach(t *testing.T) {
	ios, _, _, _ := cmdtest.Streams(false)
	var got *DetachOptions
	cmd := NewCmdDetach(cmdtest.Factory(ios), func(_ context.Context, o *DetachOptions) error { got = o; return nil })
	if err := cmdtest.Execute(cmd, "data", "--alloc", "a-1"); err != nil {
		t.Fatal(err)
	}
	if got.Volume != "data" || got.Alloc != "a-1" || got.NoWait || got.Timeout != 5*time.Minute {
		t.Errorf("got %+v", *got)
	}
	cmdtest.WantUsageError(t, cmdtest.Execute(NewCmdDetach(cmdtest.Factory(ios), func(context.Context, *DetachOptions) error { return nil })), "volume name")
}
