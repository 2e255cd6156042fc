package alloc

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/gpuaas/gpuaas/cli/cmdutil"
	"github.com/gpuaas/gpuaas/internal/api"
)

func TestNewCmdCreate(t *testing.T) {
	tests := []struct {
		name    string
		args    []string
		want    CreateOptions
		wantErr string
	}{
		{name: "sku only", args: []string{"--sku", "h100-node"}, want: CreateOptions{SKU: "h100-node"}},
		{name: "everything", args: []string{"--sku", "h100-slice", "--gpus", "2", "--queue", "--idempotency-key", "k1"},
			want: CreateOptions{SKU: "h100-slice", GPUs: 2, Queue: true, IdempotencyKey: "k1"}},
		{name: "no sku", args: []string{"--gpus", "1"}, wantErr: "--sku is required"},
		{name: "zero gpus", args: []string{"--sku", "x", "--gpus", "0"}, wantErr: "--gpus must be at least 1"},
		{name: "negative gpus", args: []string{"--sku", "x", "--gpus", "-2"}, wantErr: "--gpus must be at least 1"},
		{name: "argument", args: []string{"--sku", "x", "extra"}, wantErr: "unexpected argument"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ios, _, _, _ := testStreams(false)
			var got *CreateOptions
			cmd := NewCmdCreate(testFactory(ios), func(_ context.Context, o *CreateOptions) error { got = o; return nil })
			err := execute(cmd, tt.args...)
			if tt.wantErr != "" {
				var fe *cmdutil.FlagError
				if !errors.As(err, &fe) || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("got %v; want a usage error containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got.SKU != tt.want.SKU || got.GPUs != tt.want.GPUs || got.Queue != tt.want.Queue || got.IdempotencyKey != tt.want.IdempotencyKey {
				t.Errorf("got %+v; want %+v", *got, tt.want)
			}
			if got.Exporter != nil {
				t.Error("got an exporter without --json")
			}
		})
	}
}

func TestGPUsFor(t *testing.T) {
	tests := []struct {
		name    string
		sku     api.SKU
		want    int
		wantErr string
	}{
		{"baremetal in one size", api.SKU{ID: "h100-node", Shape: api.ShapeBaremetal, GPUCounts: []int{8}}, 8, ""},
		{"baremetal in two sizes", api.SKU{ID: "mix", Shape: api.ShapeBaremetal, GPUCounts: []int{4, 8}}, 0, "--gpus is required for baremetal SKU mix (one of 4, 8)"},
		{"slice", api.SKU{ID: "h100-slice", Shape: api.ShapeGPUSlice, GPUCounts: []int{1, 2, 4, 8}}, 0, "--gpus is required for gpu_slice SKU h100-slice (one of 1, 2, 4, 8)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := gpusFor(tt.sku)
			if tt.wantErr != "" {
				var fe *cmdutil.FlagError
				if !errors.As(err, &fe) || err.Error() != tt.wantErr {
					t.Fatalf("got %v; want usage error %q", err, tt.wantErr)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Errorf("got %d, %v; want %d", got, err, tt.want)
			}
		})
	}
}

func TestCreateJSONOutput(t *testing.T) {
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"fields", []string{"--json=id,state,gpus"}, `{"gpus":2,"id":"a-1","state":"active"}` + "\n"},
		{"jq", []string{"--jq", `.slots | map(.numa_node) | unique | .[]`}, "1\n"},
		{"template", []string{"--template", `{{.id}} on {{.node_id}}`}, "a-1 on node-1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ios, _, out, _ := testStreams(false)
			var opts *CreateOptions
			cmd := NewCmdCreate(testFactory(ios), func(_ context.Context, o *CreateOptions) error { opts = o; return nil })
			if err := execute(cmd, append([]string{"--sku", "h100-slice", "--gpus", "2"}, tt.args...)...); err != nil {
				t.Fatal(err)
			}
			a := testAlloc()
			if err := opts.Exporter.Write(context.Background(), ios, &a); err != nil {
				t.Fatal(err)
			}
			if got := out.String(); got != tt.want {
				t.Errorf("got %q; want %q", got, tt.want)
			}
		})
	}
}
