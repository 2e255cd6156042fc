package image

import (
	"context"
	"testing"

	"github.com/gpuaas/gpuaas/cli/cmdutil"
	"github.com/gpuaas/gpuaas/cli/cmdutil/cmdtest"
	"github.com/gpuaas/gpuaas/hostd/guestimage"
)

func TestNewCmdBuild(t *testing.T) {
	tests := []struct {
		name string
		args []string
		want BuildOptions
	}{
		{"defaults", []string{"--out", "/tmp/img"}, BuildOptions{Out: "/tmp/img", CacheDir: guestimage.DefaultCacheDir,
			Suite: guestimage.DefaultSuite, Mirror: guestimage.DefaultMirror}},
		{"all", []string{"--out", "d", "--cache-dir", "/c", "--suite", "trixie", "--mirror", "http://m/debian", "--force", "-v", "--nvidia"},
			BuildOptions{Out: "d", CacheDir: "/c", Suite: "trixie", Mirror: "http://m/debian", Force: true, Verbose: true, NVIDIA: true}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ios, _, _, _ := cmdutil.Test()
			var got *BuildOptions
			err := cmdtest.Execute(NewCmdBuild(cmdtest.Factory(ios), func(_ context.Context, o *BuildOptions) error { got = o; return nil }), tt.args...)
			if err != nil {
				t.Fatal(err)
			}
			g := *got
			g.IO = nil
			if g != tt.want {
				t.Errorf("got %+v; want %+v", g, tt.want)
			}
		})
	}
	for _, args := range [][]string{{}, {"--out", "d", "extra"}} {
		ios, _, _, _ := cmdutil.Test()
		cmdtest.WantUsageError(t, cmdtest.Execute(NewCmdBuild(cmdtest.Factory(ios), func(context.Context, *BuildOptions) error { return nil }), args...), "")
	}
}
