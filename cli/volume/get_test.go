package volume

import (
	"context"
	"testing"

	"github.com/gpuaas/gpuaas/cli/cmdutil/cmdtest"
)

func TestNewCmdGet(t *testing.T) {
	ios, _, _, _ := cmdtest.Streams(false)
	var got *GetOptions
	cmd := NewCmdGet(cmdtest.Factory(ios), func(_ context.Context, o *GetOptions) error { got = o; return nil })
	if err := cmdtest.Execute(cmd, "data"); err != nil {
		t.Fatal(err)
	}
	if got.Volume != "data" {
		t.Errorf("got volume %q; want data", got.Volume)
	}
	err := cmdtest.Execute(NewCmdGet(cmdtest.Factory(ios), func(context.Context, *GetOptions) error { return nil }))
	cmdtest.WantUsageError(t, err, "volume name")
}
