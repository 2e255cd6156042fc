package volume

import (
	"context"
	"errors"
	"testing"

	"github.com/gpuaas/gpuaas/cli/cmdutil"
	"github.com/gpuaas/gpuaas/cli/cmdutil/cmdtest"
)

func TestNewCmdCreate(t *testing.T) {
	tests := []struct {
		name    string
		args    []string
		want    CreateOptions
		wantErr bool
	}{
		{name: "size", args: []string{"data", "--size", "100G"}, want: CreateOptions{Name: "data", Size: "100G"}},
		{name: "node and wait", args: []string{"data", "--size", "1T", "--node", "gpu-07", "--wait"},
			want: CreateOptions{Name: "data", Size: "1T", Node: "gpu-07", Wait: true}},
		{name: "dry run", args: []string{"data", "--size", "100G", "--dry-run"}, want: CreateOptions{Name: "data", Size: "100G", DryRun: true}},
		{name: "dry run and wait", args: []string{"data", "--size", "100G", "--dry-run", "--wait"}, wantErr: true},
		{name: "no size", args: []string{"data"}, wantErr: true},
		{name: "zero", args: []string{"data", "--size", "0"}, wantErr: true},
		{name: "negative", args: []string{"data", "--size", "-1G"}, wantErr: true},
		{name: "unknown unit", args: []string{"data", "--size", "1.5X"}, wantErr: true},
		{name: "bad name", args: []string{"My Data", "--size", "1G"}, wantErr: true},
		{name: "no name", args: []string{"--size", "1G"}, wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ios, _, _, _ := cmdtest.Streams(false)
			var got *CreateOptions
			cmd := NewCmdCreate(cmdtest.Factory(ios), func(_ context.Context, o *CreateOptions) error { got = o; return nil })
			err := cmdtest.Execute(cmd, tt.args...)
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
			if got.Name != tt.want.Name || got.Size != tt.want.Size || got.Node != tt.want.Node || got.Wait != tt.want.Wait || got.DryRun != tt.want.DryRun {
				t.Errorf("got %+v; want %+v", *got, tt.want)
			}
		})
	}
}
