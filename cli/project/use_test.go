package project

import (
	"context"
	"testing"

	"github.com/gpuaas/gpuaas/cli/cmdutil/cmdtest"
)

func TestNewCmdUse(t *testing.T) {
	ios, _, _, _ := cmdtest.Streams(false)
	f, _ := cmdtest.ConfigFactory(t, ios, nil)
	var got *UseOptions
	if err := cmdtest.Execute(NewCmdUse(f, func(_ context.Context, o *UseOptions) error { got = o; return nil }), "ml"); err != nil {
		t.Fatal(err)
	}
	if got.Project != "ml" {
		t.Errorf("got %q; want ml", got.Project)
	}
	cmdtest.WantUsageError(t, cmdtest.Execute(NewCmdUse(f, nil)), "requires a project name")
}
