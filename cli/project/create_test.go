package project

import (
	"context"
	"testing"

	"github.com/gpuaas/gpuaas/cli/cmdutil/cmdtest"
)

func TestNewCmdCreate(t *testing.T) {
	ios, _, _, _ := cmdtest.Streams(false)
	f, _ := cmdtest.ConfigFactory(t, ios, nil)
	var got *CreateOptions
	cmd := NewCmdCreate(f, func(_ context.Context, o *CreateOptions) error { got = o; return nil })
	if err := cmdtest.Execute(cmd, "ml", "--json=id"); err != nil {
		t.Fatal(err)
	}
	if got.Name != "ml" || got.Exporter == nil {
		t.Errorf("got name %q exporter %v; want ml and an exporter", got.Name, got.Exporter)
	}
	cmdtest.WantUsageError(t, cmdtest.Execute(NewCmdCreate(f, nil)), "requires a project name")
	cmdtest.WantUsageError(t, cmdtest.Execute(NewCmdCreate(f, nil), "a", "b"), "too many arguments")
}
