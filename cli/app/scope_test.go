package app

import (
	"context"
	"testing"

	"github.com/spf13/cobra"

	"github.com/gpuaas/gpuaas/cli/cmdutil"
	"github.com/gpuaas/gpuaas/cli/cmdutil/cmdtest"
)

// TestVerbsTakeTheAppsScope: get, promote, deprecate and retire take
// --platform, and send -p/--project (the global flag) as the app's
// project; both at once is a usage error.
func TestVerbsTakeTheAppsScope(t *testing.T) {
	type scope struct {
		project  string
		platform bool
	}
	verbs := map[string]func(*cmdutil.Factory, *scope) *cobra.Command{
		"get": func(f *cmdutil.Factory, got *scope) *cobra.Command {
			return NewCmdGet(f, func(_ context.Context, o *GetOptions) error { *got = scope{o.Project, o.Platform}; return nil })
		},
	}
	for name, build := range map[string]func(*cmdutil.Factory, func(context.Context, *ChangeOptions) error) *cobra.Command{
		"promote": NewCmdPromote, "deprecate": NewCmdDeprecate, "retire": NewCmdRetire,
	} {
		verbs[name] = func(f *cmdutil.Factory, got *scope) *cobra.Command {
			return build(f, func(_ context.Context, o *ChangeOptions) error { *got = scope{o.Project, o.Platform}; return nil })
		}
	}
	for name, build := range verbs {
		t.Run(name, func(t *testing.T) {
			ios, _, _, _ := cmdtest.Streams(false)
			f := cmdtest.Factory(ios)
			var got scope
			if err := cmdtest.Execute(build(f, &got), "jupyter", "--platform"); err != nil || got != (scope{"", true}) {
				t.Errorf("--platform: %v, %+v", err, got)
			}
			f.Flags.Project = "research"
			got = scope{}
			if err := cmdtest.Execute(build(f, &got), "jupyter"); err != nil || got != (scope{"research", false}) {
				t.Errorf("-p research: %v, %+v", err, got)
			}
			cmdtest.WantUsageError(t, cmdtest.Execute(build(f, &got), "jupyter", "--platform"), "--platform and -p/--project")
		})
	}
}
