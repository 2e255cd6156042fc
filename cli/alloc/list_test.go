package alloc

import (
	"context"
	"errors"
	"testing"

	"github.com/gpuaas/gpuaas/cli/cmdutil"
	"github.com/gpuaas/gpuaas/cli/cmdutil/cmdtest"
	"github.com/gpuaas/gpuaas/internal/api"
)

func TestNewCmdList(t *testing.T) {
	tests := []struct {
		name    string
		args    []string
		want    ListOptions
		wantErr bool
	}{
		{name: "defaults", args: nil, want: ListOptions{}},
		{name: "state and all", args: []string{"--state", "active", "--all"}, want: ListOptions{State: "active", All: true}},
		{name: "unknown state", args: []string{"--state", "zombie"}, wantErr: true},
		{name: "argument", args: []string{"a-1"}, wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ios, _, _, _ := cmdtest.Streams(false)
			var got *ListOptions
			cmd := NewCmdList(cmdtest.Factory(ios), func(_ context.Context, o *ListOptions) error { got = o; return nil })
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
			if got.State != tt.want.State || got.All != tt.want.All {
				t.Errorf("got state %q all %v; want %q %v", got.State, got.All, tt.want.State, tt.want.All)
			}
		})
	}
}

func TestListJSONOutput(t *testing.T) {
	tests := []struct {
		name string
		args []string
		data []api.Allocation
		want string
	}{
		{"fields", []string{"--json=id,node_id"}, []api.Allocation{testAlloc()}, `[{"id":"a-1","node_id":"node-1"}]` + "\n"},
		{"empty list", []string{"--json=id"}, nil, "[]\n"},
		{"jq", []string{"--jq", `.[] | select(.state == "active") | .id`}, []api.Allocation{testAlloc()}, "a-1\n"},
		{"template", []string{"--template", `{{range .}}{{.id}}{{"\t"}}{{.gpus}}{{"\n"}}{{end}}`}, []api.Allocation{testAlloc()}, "a-1\t2\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ios, _, out, _ := cmdtest.Streams(false)
			var opts *ListOptions
			cmd := NewCmdList(cmdtest.Factory(ios), func(_ context.Context, o *ListOptions) error { opts = o; return nil })
			if err := cmdtest.Execute(cmd, tt.args...); err != nil {
				t.Fatal(err)
			}
			if err := opts.Exporter.Write(context.Background(), ios, tt.data); err != nil {
				t.Fatal(err)
			}
			if got := out.String(); got != tt.want {
				t.Errorf("got %q; want %q", got, tt.want)
			}
		})
	}
}
