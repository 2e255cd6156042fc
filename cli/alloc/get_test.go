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

func TestNewCmdGet(t *testing.T) {
	tests := []struct {
		name       string
		args       []string
		wantID     string
		wantFields []string
		wantErr    bool
	}{
		{name: "id", args: []string{"a-1"}, wantID: "a-1"},
		{name: "json fields", args: []string{"a-1", "--json=id,state"}, wantID: "a-1", wantFields: []string{"id", "state"}},
		{name: "json fields, gh style", args: []string{"--json", "id,slots", "a-1"}, wantID: "a-1", wantFields: []string{"id", "slots"}},
		{name: "bare json", args: []string{"a-1", "--json"}, wantID: "a-1", wantFields: cmdutil.FieldsOf(api.Allocation{})},
		{name: "no id", args: nil, wantErr: true},
		{name: "two ids", args: []string{"a-1", "a-2"}, wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ios, _, _, _ := cmdtest.Streams(false)
			var got *GetOptions
			cmd := NewCmdGet(cmdtest.Factory(ios), func(_ context.Context, o *GetOptions) error { got = o; return nil })
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
			if got.ID != tt.wantID {
				t.Errorf("got ID %q; want %q", got.ID, tt.wantID)
			}
			var fields []string
			if got.Exporter != nil {
				fields = got.Exporter.Fields()
			}
			if !slices.Equal(fields, tt.wantFields) {
				t.Errorf("got fields %v; want %v", fields, tt.wantFields)
			}
		})
	}
}
