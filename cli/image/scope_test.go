package image

import (
	"context"
	"testing"

	"github.com/spf13/cobra"

	"github.com/gpuaas/gpuaas/cli/cmdutil"
	"github.com/gpuaas/gpuaas/cli/cmdutil/cmdtest"
)

// TestVerbsTakeTheImagesScope: get and the changes take --platform, and
// send -p/--project (the global flag) as the image's project; both at
// once is a usage error.
func TestVerbsTakeTheImagesScope(t *testing.T) {
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
		"verify": NewCmdVerify, "promote": NewCmdPromote, "deprecate": NewCmdDeprecate, "retire": NewCmdRetire, "revoke": NewCmdRevoke,
	} {
		verbs[name] = func(f *cmdutil.Factory, got *scope) *cobra.Command {
			return build(f, func(_ context.Context, o *ChangeOptions) error { *got = scope{o.Project, o.Platform}; return nil })
		}
	}
	for name, build := range verbs {
		t.Run(name, func(t *testing.T) {
			f := cmdtest.Factory(streams(false))
			args := []string{"tool"}
			if name == "revoke" {
				args = append(args, "--reason", "CVE-1")
			}
			var got scope
			if err := cmdtest.Execute(build(f, &got), append(args, "--platform")...); err != nil || got != (scope{"", true}) {
				t.Errorf("--platform: %v, %+v", err, got)
			}
			f.Flags.Project = "research"
			got = scope{}
			if err := cmdtest.Execute(build(f, &got), args...); err != nil || got != (scope{"research", false}) {
				t.Errorf("-p research: %v, %+v", err, got)
			}
			cmdtest.WantUsageError(t, cmdtest.Execute(build(f, &got), append(args, "--platform")...), "--platform and -p/--project")
		})
	}
}
