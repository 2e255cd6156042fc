package volume

import (
	"context"
	"testing"

	"github.com/gpuaas/gpuaas/cli/cmdutil/cmdtest"
)

func TestNewCmdList(t *testing.T) {
	for _, tt := range []struct {
		name string
		args []string
		all  bool
	}{{"default", nil, false}, {"all", []string{"--all"}, true}} {
		t.Run(tt.name, func(t *testing.T) {
			ios, _, _, _ := cmdtest.Streams(false)
			var got *ListOptions
			cmd := NewCmdList(cmdtest.Factory(ios), func(_ context.Context, o *ListOptions) error { got = o; return nil })
			if err := cmdtest.Execute(cmd, tt.args...); err != nil {
				t.Fatal(err)
			}
			if got.All != tt.all {
				t.Errorf("got All %v; want %v", got.All, tt.all)
			}
		})
	}
	ios, _, _, _ := cmdtest.Streams(false)
	err := cmdtest.Execute(NewCmdList(cmdtest.Factory(ios), func(context.Context, *ListOptions) error { return nil }), "extra")
	cmdtest.WantUsageError(t, err, "")
}
