package project

import (
	"context"
	"testing"

	"github.com/gpuaas/gpuaas/cli/cmdutil/cmdtest"
)

func TestNewCmdList(t *testing.T) {
	ios, _, out, _ := cmdtest.Streams(false)
	f, _ := cmdtest.ConfigFactory(t, ios, nil)
	var got *ListOptions
	cmd := NewCmdList(f, func(_ context.Context, o *ListOptions) error { got = o; return nil })
	if err := cmdtest.Execute(cmd, "--jq", ".[].name"); err != nil {
		t.Fatal(err)
	}
	if err := got.Exporter.Write(context.Background(), ios, testProjects()); err != nil {
		t.Fatal(err)
	}
	if got, want := out.String(), "dev\nml\n"; got != want {
		t.Errorf("got %q; want %q", got, want)
	}
	cmdtest.WantUsageError(t, cmdtest.Execute(NewCmdList(f, nil), "extra"), "unexpected argument")
}
