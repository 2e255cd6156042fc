package project

import (
	"context"
	"testing"

	"github.com/gpuaas/gpuaas/cli/cmdutil/cmdtest"
)

func TestNewCmdSet(t *testing.T) {
	ios, _, _, _ := cmdtest.Streams(false)
	f, _ := cmdtest.ConfigFactory(t, ios, nil)
	var got *SetOptions
	run := func(_ context.Context, o *SetOptions) error { got = o; return nil }
	if err := cmdtest.Execute(NewCmdSet(f, run), "ml", "--idle-release-after", "2h"); err != nil {
		t.Fatal(err)
	}
	if got.Project != "ml" || got.IdleReleaseAfter != "2h" {
		t.Errorf("got %+v; want ml, 2h", got)
	}
	cmdtest.WantUsageError(t, cmdtest.Execute(NewCmdSet(f, run), "ml"), "nothing to set")
	cmdtest.WantUsageError(t, cmdtest.Execute(NewCmdSet(f, run)), "requires a project name")
}
