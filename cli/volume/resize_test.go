package volume

import (
	"context"
	"testing"

	"github.com/gpuaas/gpuaas/cli/cmdutil/cmdtest"
)

func TestNewCmdResize(t *testing.T) {
	ios, _, _, _ := cmdtest.Streams(false)
	var got *ResizeOptions
	cmd := NewCmdResize(cmdtest.Factory(ios), func(_ context.Context, o *ResizeOptions) error { got = o; return nil })
	if err := cmdtest.Execute(cmd, "data", "--size", "200G", "--wait"); err != nil {
		t.Fatal(err)
	}
	if got.Volume != "data" || got.Size != "200G" || !got.Wait {
		t.Errorf("got %+v", *got)
	}
	for _, args := range [][]string{{"data"}, {"data", "--size", "1.5X"}, {"data", "--size", "0"}, {"--size", "2G"}} {
		err := cmdtest.Execute(NewCmdResize(cmdtest.Factory(ios), func(context.Context, *ResizeOptions) error { return nil }), args...)
		cmdtest.WantUsageError(t, err, "")
	}
}
