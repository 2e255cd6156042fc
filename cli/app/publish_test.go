package app

import (
	"context"
	"testing"

	"github.com/gpuaas/gpuaas/cli/cmdutil/cmdtest"
)

func TestNewCmdPublishAndChanges(t *testing.T) {
	ios, _, _, _ := cmdtest.Streams(false)
	f := cmdtest.Factory(ios)
	var p *PublishOptions
	capture := func(_ context.Context, o *PublishOptions) error { p = o; return nil }
	if err := cmdtest.Execute(NewCmdPublish(f, capture), "-f", "app.yaml", "--platform", "--json=id,lifecycle"); err != nil ||
		p.File != "app.yaml" || !p.Platform || p.Exporter == nil {
		t.Errorf("publish: %v %+v", err, p)
	}
	cmdtest.WantUsageError(t, cmdtest.Execute(NewCmdPublish(f, capture)), "-f app.yaml")
	cmdtest.WantUsageError(t, cmdtest.Execute(NewCmdPublish(f, capture), "-f", "app.yaml", "extra"), "unexpected argument")

	for name, build := range map[string]func(f2 func(context.Context, *ChangeOptions) error) error{
		"promote": func(r func(context.Context, *ChangeOptions) error) error {
			return cmdtest.Execute(NewCmdPromote(f, r), "jupyter")
		},
		"deprecate": func(r func(context.Context, *ChangeOptions) error) error {
			return cmdtest.Execute(NewCmdDeprecate(f, r), "jupyter")
		},
		"retire": func(r func(context.Context, *ChangeOptions) error) error {
			return cmdtest.Execute(NewCmdRetire(f, r), "jupyter")
		},
	} {
		var c *ChangeOptions
		if err := build(func(_ context.Context, o *ChangeOptions) error { c = o; return nil }); err != nil || c.App != "jupyter" {
			t.Errorf("%s: %v %+v", name, err, c)
		}
	}
	cmdtest.WantUsageError(t, cmdtest.Execute(NewCmdPromote(f, func(context.Context, *ChangeOptions) error { return nil })), "app name")
}
