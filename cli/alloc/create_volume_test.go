package alloc

import (
	"context"
	"errors"
	"slices"
	"testing"

	"github.com/gpuaas/gpuaas/cli/cmdutil"
	"github.com/gpuaas/gpuaas/cli/cmdutil/cmdtest"
	"github.com/gpuaas/gpuaas/internal/api"
)

func TestNewCmdCreateVolumes(t *testing.T) {
	tests := []struct {
		name    string
		args    []string
		want    []api.VolumeMount
		wantErr bool
	}{
		{name: "none", args: nil},
		{name: "default path", args: []string{"--volume", "data"}, want: []api.VolumeMount{{Volume: "data"}}},
		{name: "path and repeated", args: []string{"--volume", "data:/data", "--volume", "ckpt:/mnt/ckpt"},
			want: []api.VolumeMount{{Volume: "data", Path: "/data"}, {Volume: "ckpt", Path: "/mnt/ckpt"}}},
		{name: "system path", args: []string{"--volume", "data:/etc"}, wantErr: true},
		{name: "relative path", args: []string{"--volume", "data:data"}, wantErr: true},
		{name: "dot dot", args: []string{"--volume", "data:/data/../etc"}, wantErr: true},
		{name: "no name", args: []string{"--volume", ":/data"}, wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ios, _, _, _ := cmdtest.Streams(false)
			var got *CreateOptions
			cmd := NewCmdCreate(cmdtest.Factory(ios), func(_ context.Context, o *CreateOptions) error { got = o; return nil })
			err := cmdtest.Execute(cmd, append([]string{"--sku", "h100-baremetal"}, tt.args...)...)
			if tt.wantErr {
				var fe *cmdutil.FlagError
				if !errors.As(err, &fe) {
					t.Fatalf("got %v; want a usage error", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(got.Volumes, tt.want) {
				t.Errorf("got volumes %+v; want %+v", got.Volumes, tt.want)
			}
		})
	}
}
